package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/report"
)

// tableCmd prints a markdown table of finished runs from their
// results.json files (docs/jepsen.md is made with it).
func tableCmd(paths []string) int {
	if len(paths) == 0 {
		fmt.Fprintln(os.Stderr, "usage: lockjepsen table jepsen/results/*/results.json")
		return 2
	}
	var rows []report.Summary
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockjepsen table:", err)
			return 1
		}
		var s report.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			fmt.Fprintf(os.Stderr, "lockjepsen table: %s: %v\n", p, err)
			return 1
		}
		rows = append(rows, s)
	}
	slices.SortStableFunc(rows, func(a, b report.Summary) int {
		return strings.Compare(a.Negative+a.Workload+strings.Join(a.Nemesis, "+")+fmt.Sprint(len(a.Nodes)),
			b.Negative+b.Workload+strings.Join(b.Nemesis, "+")+fmt.Sprint(len(b.Nodes)))
	})
	fmt.Println("| run | workload | nemesis | nodes | time | grants | ops ok/fail/info | faults | verdict |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, s := range rows {
		var ok, fail, info int
		for _, byType := range s.Ops {
			ok += byType["ok"]
			fail += byType["fail"]
			info += byType["info"]
		}
		var faults []string
		for _, k := range sortedKeys(s.Faults) {
			faults = append(faults, fmt.Sprintf("%s %d", k, s.Faults[k]))
		}
		var bad []string
		for _, r := range s.Results {
			if r.Verdict != checker.Valid {
				bad = append(bad, fmt.Sprintf("%s %s", r.Checker, r.Verdict))
			}
		}
		verdict := fmt.Sprintf("**valid** (%d checkers)", len(s.Results))
		if !s.Valid {
			verdict = "**invalid**: " + strings.Join(bad, ", ")
		}
		nem := strings.Join(s.Nemesis, "+")
		if s.Negative != "" {
			nem += " (negative control: " + s.Negative + ")"
		}
		fmt.Printf("| %s | %s | %s | %d | %v | %d | %d/%d/%d | %s | %s |\n", s.ID, s.Workload, nem, len(s.Nodes),
			s.Duration, s.Ops["acquire"]["ok"], ok, fail, info, strings.Join(faults, ", "), verdict)
	}
	return 0
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
