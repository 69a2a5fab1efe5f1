package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/history"
	"github.com/lockd/lockd/jepsen/report"
	"github.com/lockd/lockd/jepsen/workload"
)

// checkCmd judges a finished run again from its history.jsonl with the
// checkers of this build (the convergence verdict, which needed the live
// cluster, is kept) and rewrites its results.json and report.html.
func checkCmd(args []string) int {
	fs := flag.NewFlagSet("lockjepsen check", flag.ContinueOnError)
	liveness := fs.Duration("liveness", 0, "liveness bound (default: 30s)")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: lockjepsen check [--liveness D] RUN_DIR...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	code := 0
	for _, dir := range fs.Args() {
		sum, err := recheck(dir, *liveness)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lockjepsen check %s: %v\n", dir, err)
			code = 1
			continue
		}
		printVerdict(sum, dir)
		if sum.Negative != "" && !sum.Flagged() || sum.Negative == "" && !sum.Valid {
			code = 1
		}
		if err := unapplied(sum); err != nil {
			fmt.Println(err)
			code = 1
		}
	}
	return code
}

func recheck(dir string, liveness time.Duration) (report.Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return report.Summary{}, err
	}
	var old report.Summary
	if err := json.Unmarshal(b, &old); err != nil {
		return report.Summary{}, err
	}
	events, err := history.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return report.Summary{}, err
	}
	w, err := workload.New(old.Workload)
	if err != nil {
		return report.Summary{}, err
	}
	cfg := checker.Config{Workload: old.Workload, Limit: w.Limit(), Fenced: old.Negative != negUnfenced,
		OutDir: dir, LivenessBound: liveness, Intruder: checker.HadIntruder(events)}
	results := checker.All(events, cfg)
	for _, r := range old.Results {
		if r.Checker == "convergence" {
			results = append(results, r)
		}
	}
	sum := report.Summarize(old.Run, events, results)
	if old.Negative != "" {
		sum.Control = judgeControl(old.Negative, events)
	}
	if err := report.WriteJSON(dir, sum); err != nil {
		return sum, err
	}
	return sum, report.WriteHTML(dir, sum, events)
}
