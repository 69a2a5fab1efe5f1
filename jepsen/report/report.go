// Package report summarises a Jepsen-style run of lockd: results.json
// (machine-readable counts and verdicts) and report.html (a single
// self-contained page with the verdicts, an operation timeline with the
// fault windows, and a latency plot).
package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/history"
)

// Run is the metadata of one run.
type Run struct {
	// ID names the run (and its directory), e.g.
	// "20261122T170102Z-mutex-mixed-n3".
	ID       string        `json:"id"`
	Workload string        `json:"workload"`
	Nemesis  []string      `json:"nemesis"`
	Nodes    []string      `json:"nodes"`
	Duration time.Duration `json:"duration_ns"`
	Seed     int64         `json:"seed"`
	Clients  int           `json:"clients"`
	Started  time.Time     `json:"started"`
	// Negative names the negative control (a deliberately broken lockd
	// the checkers must catch); "" for a normal run.
	Negative string   `json:"negative_control"`
	Command  []string `json:"command,omitempty"`
	Commit   string   `json:"lockd_commit,omitempty"`
	// SnapshotInstalls counts, per node, the snapshots it caught up
	// through (InstallSnapshot), from the node logs.
	SnapshotInstalls map[string]int `json:"snapshot_installs,omitempty"`
}

// Latency is the distribution of one operation's latency (invoke to
// completion, whatever the outcome), in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Unfinished is the Ops type counting invokes that never completed (the
// run ended first; the checkers treat them as info).
const Unfinished = "unfinished"

// Summary is what results.json holds: the run, the verdicts and the
// counts of the history.
type Summary struct {
	Run
	// Valid: every checker result is valid (and there is at least one:
	// a run nothing judged proves nothing).
	Valid   bool             `json:"valid"`
	Results []checker.Result `json:"results"`
	Events  int              `json:"events"`
	// Ops counts client events: op f -> event type (invoke, ok, fail,
	// info, and Unfinished) -> count.
	Ops map[string]map[string]int `json:"ops"`
	// Faults counts the faults drawn by name: those applied, and apart
	// as "<name> (failed)" those that failed to apply in full.
	Faults    map[string]int     `json:"faults"`
	LatencyMS map[string]Latency `json:"latency_ms"`
	// Control says, for a negative control's run, whether its condition
	// happened (see lockjepsen's control.go).
	Control *Control `json:"control,omitempty"`
}

// Control is what a negative control's run shows of its condition.
type Control struct {
	Name      string   `json:"name"`
	Exercised bool     `json:"exercised"`
	Evidence  []string `json:"evidence,omitempty"` // what shows it happened
	Missed    []string `json:"missed,omitempty"`   // aimed attempts that did not land, and why
}

// Summarize counts events and latencies and folds the checker verdicts.
func Summarize(run Run, events []history.Event, results []checker.Result) Summary {
	s := Summary{
		Run:       run,
		Valid:     len(results) > 0,
		Results:   results,
		Events:    len(events),
		Ops:       map[string]map[string]int{},
		Faults:    map[string]int{},
		LatencyMS: map[string]Latency{},
	}
	if s.Results == nil {
		s.Results = []checker.Result{} // "[]" rather than null in JSON
	}
	for _, r := range results {
		if !r.OK() {
			s.Valid = false
		}
	}
	inc := func(f, typ string) {
		m := s.Ops[f]
		if m == nil {
			m = map[string]int{}
			s.Ops[f] = m
		}
		m[typ]++
	}
	for _, e := range events {
		switch {
		case e.Process >= 0:
			inc(e.F, string(e.Type))
		case e.Process == history.Nemesis && (e.F == history.Start && e.Error != "" || e.F == history.Unapplied):
			s.Faults[faultName(e.Fault)+failed]++ // applied in part at most
		case e.Process == history.Nemesis && e.F == history.Start:
			s.Faults[faultName(e.Fault)]++
		}
	}
	lat := map[string][]time.Duration{}
	for _, p := range history.Pairs(events) {
		if p.Completion == nil {
			inc(p.Invoke.F, Unfinished)
			continue
		}
		lat[p.Invoke.F] = append(lat[p.Invoke.F], p.Completion.Time-p.Invoke.Time)
	}
	for f, ds := range lat {
		slices.Sort(ds)
		s.LatencyMS[f] = Latency{
			N:   len(ds),
			P50: ms(percentile(ds, 0.50)),
			P95: ms(percentile(ds, 0.95)),
			P99: ms(percentile(ds, 0.99)),
			Max: ms(ds[len(ds)-1]),
		}
	}
	return s
}

// failed marks a fault of Summary.Faults that failed to apply.
const failed = " (failed)"

// UnappliedKinds returns the kinds of fault (kindOf names a fault's) of
// which the run drew some and applied none, with how many it drew: every
// one failed. A run whose faults of a kind all failed tested nothing of
// that kind, whatever its checkers say.
func (s Summary) UnappliedKinds(kindOf func(fault string) string) map[string]int {
	drawn, applied := map[string]int{}, map[string]bool{}
	for name, n := range s.Faults {
		fault, didFail := strings.CutSuffix(name, failed)
		if kind := kindOf(fault); kind != "" {
			drawn[kind] += n
			applied[kind] = applied[kind] || !didFail
		}
	}
	for kind := range applied {
		if applied[kind] {
			delete(drawn, kind)
		}
	}
	return drawn
}

func faultName(f string) string {
	if f == "" {
		return "(unnamed)"
	}
	return f
}

// percentile is the nearest-rank percentile of sorted, non-empty ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// ms converts to milliseconds, rounded to microseconds to keep the JSON
// readable.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3
}

// Flagged reports whether some checker found a violation (Invalid, not
// merely Unknown): what a negative control must achieve.
func (s Summary) Flagged() bool {
	for _, r := range s.Results {
		if r.Verdict == checker.Invalid {
			return true
		}
	}
	return false
}

// WriteJSON writes s, indented, to dir/results.json (creating dir).
func WriteJSON(dir string, s Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return writeFile(dir, "results.json", append(b, '\n'))
}

func writeFile(dir, name string, b []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
