package main

import (
	"strings"
	"testing"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/report"
)

// A run every fault of some kind of which failed to apply fails, however
// its checkers judged it: it tested nothing of that kind. A kind with one
// fault applied, or none drawn, passes.
func TestUnappliedKindFailsTheRun(t *testing.T) {
	tests := []struct {
		name   string
		faults map[string]int
		want   string // in the message; "" for a run that passes
	}{
		{"every power fault failed", map[string]int{"power-loss (failed)": 2, "torn-write (failed)": 1, "kill": 3}, "all 3 power faults"},
		{"one power fault applied", map[string]int{"power-loss (failed)": 2, "torn-write": 1}, ""},
		{"two kinds failed", map[string]int{"clock-bump (failed)": 1, "member-grow (failed)": 2, "partition-node": 1}, "all 1 clock faults and all 2 membership faults"},
		{"a partition renamed, applied", map[string]int{"partition-leader (failed)": 1, "partition-node": 1}, ""},
		{"nothing drawn", map[string]int{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseRunFlags([]string{"--nemesis", "mixed", "--dir", t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			sum := report.Summarize(report.Run{}, nil, []checker.Result{{Checker: "safety", Verdict: checker.Valid}})
			sum.Faults = tt.faults
			err = unapplied(sum)
			switch code := judgedAsExpected(cfg, sum); {
			case tt.want == "" && (err != nil || code != 0):
				t.Errorf("exit %d (%v), want 0", code, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || code != 1):
				t.Errorf("exit %d (%v), want 1 saying %q", code, err, tt.want)
			}
		})
	}
}
