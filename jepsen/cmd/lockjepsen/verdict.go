package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockd/lockd/jepsen/nemesis"
	"github.com/lockd/lockd/jepsen/report"
)

// judgedAsExpected returns the exit code of a judged run: 0 when it is
// valid, or for a negative control when some checker flagged it; 1,
// whatever the checkers say, when every fault of some kind it drew
// failed to apply.
func judgedAsExpected(cfg *runConfig, sum report.Summary) int {
	if err := unapplied(sum); err != nil {
		fmt.Println(err)
		return 1
	}
	switch {
	case cfg.negative != "" && sum.Flagged():
		fmt.Printf("negative control %q was flagged invalid, as it must be\n", cfg.negative)
		return 0
	case cfg.negative != "" && sum.Control != nil && !sum.Control.Exercised:
		fmt.Printf("negative control %q was not exercised: its condition did not happen in this run (not flagged either)\n", cfg.negative)
		return exitNotExercised
	case cfg.negative != "":
		fmt.Printf("negative control %q was exercised and NOT flagged: the checkers missed it\n", cfg.negative)
		return 1
	case sum.Valid:
		return 0
	}
	return 1
}

func printVerdict(s report.Summary, outDir string) {
	for _, r := range s.Results {
		keys := make([]string, 0, len(r.Counts))
		for k := range r.Counts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var counts []string
		for _, k := range keys {
			counts = append(counts, fmt.Sprintf("%s=%d", k, r.Counts[k]))
		}
		fmt.Printf("%-16s %-8s %s\n", r.Checker, r.Verdict, strings.Join(counts, " "))
		for i, a := range r.Anomalies {
			if i == 5 {
				fmt.Printf("%16s ... %d more in results.json\n", "", len(r.Anomalies)-5)
				break
			}
			fmt.Printf("%16s %s\n", "", a)
		}
	}
	if c := s.Control; c != nil {
		fmt.Printf("control %s: exercised=%v evidence=%q missed=%q\n", c.Name, c.Exercised, c.Evidence, c.Missed)
	}
	verdict := "VALID"
	if !s.Valid {
		verdict = "INVALID"
	}
	fmt.Printf("%s: %s (report: %s)\n", s.ID, verdict, filepath.Join(outDir, "report.html"))
}

// unapplied is an error naming the kinds of fault of which the run drew
// some and applied none, nil if none: it tested nothing of them.
func unapplied(sum report.Summary) error {
	kinds := sum.UnappliedKinds(nemesis.KindOf)
	if len(kinds) == 0 {
		return nil
	}
	var each []string
	for _, kind := range sortedKeys(kinds) {
		each = append(each, fmt.Sprintf("all %d %s faults", kinds[kind], kind))
	}
	return fmt.Errorf("faults not applied: %s this run drew failed to apply (results.json lists them, the log says why): it tested nothing of them",
		strings.Join(each, " and "))
}
