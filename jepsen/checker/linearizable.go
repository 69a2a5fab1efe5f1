package checker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockd/lockd/jepsen/history"
)

// Linearizable checks the lock operations (acquire, release, close and
// lost sessions) against a sequential lock table with porcupine. Resource
// operations are not part of the model. The history is partitioned into
// groups of names no acquire links (by the first path segment, so the
// hierarchy stays inside a partition), and each partition is cut in time
// where the table is provably empty (segments.go). On a timeout the
// verdict is Unknown; when the history is not linearizable, porcupine's
// HTML visualisation of the segments that are not is written to
// cfg.OutDir/linearizability.html.
func Linearizable(events []history.Event, cfg Config) Result {
	r := newResult("linearizable")
	operations := LockOperations(events, cfg)
	r.Counts["operations"] = len(operations)
	r.Counts["partitions"] = countPartitions(operations)
	if len(operations) == 0 {
		r.Note = "no lock operations"
		return r
	}
	timeout := cfg.LinearizabilityTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	segmented, segments := segmentOperations(operations, minSegment)
	r.Counts["segments"] = segments
	lockModel := LockModel()
	model := lockModel.ToModel()
	start := time.Now()
	res := porcupine.CheckOperationsTimeout(model, segmented, timeout)
	r.Note = fmt.Sprintf("porcupine %s in %v", res, time.Since(start).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
		return r
	case porcupine.Unknown:
		r.Verdict = Unknown
		return r
	}
	r.anomaly(cfg, "lock operations are not linearizable (see the visualisation for the longest partial linearizations)")
	// Again, verbose, on the segments that fail only: the search that
	// keeps every partial linearization costs twice the time.
	_, info := porcupine.CheckOperationsVerbose(model, illegalSegments(model, segmented, timeout), timeout)
	reportLongestLinearizations(&r, cfg, &info)
	if cfg.OutDir != "" {
		writeVisualisation(&r, cfg.OutDir, model, &info, events)
	}
	return r
}

func countPartitions(operations []porcupine.Operation) int {
	parts := map[int]bool{}
	for _, o := range operations {
		parts[o.Input.(LockInput).Part] = true
	}
	return len(parts)
}

// illegalSegments returns the operations of the segments (partitions)
// of ops that are not linearizable on their own.
func illegalSegments(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) []porcupine.Operation {
	var out []porcupine.Operation
	for _, seg := range partitionByPart(ops) {
		if porcupine.CheckOperationsTimeout(model, seg, timeout) == porcupine.Illegal {
			out = append(out, seg...)
		}
	}
	return out
}

// reportLongestLinearizations adds an anomaly per partition naming the
// operation its longest partial linearization ends with: where to look.
func reportLongestLinearizations(r *Result, cfg Config, info *porcupine.LinearizationInfo) {
	for _, part := range info.PartialLinearizationsOperations() {
		if len(part) == 0 {
			continue
		}
		longest := part[0]
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if n := len(longest); n > 0 {
			last := longest[n-1]
			r.anomaly(cfg, "segment %d: longest linearization (%d ops) ends with %s", last.Input.(LockInput).Part, n,
				describeOp(last.Input, last.Output))
		}
	}
}

// writeVisualisation writes porcupine's visualisation, with the faults
// marked, to dir/linearizability.html.
func writeVisualisation(r *Result, dir string, model porcupine.Model, info *porcupine.LinearizationInfo, events []history.Event) {
	info.AddAnnotations(nemesisAnnotations(events))
	path := filepath.Join(dir, "linearizability.html")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = porcupine.VisualizePath(model, *info, path)
		if err == nil {
			r.Files = append(r.Files, "linearizability.html")
		} else {
			r.Note += "; visualisation: " + err.Error()
		}
	}
}

// nemesisAnnotations marks faults in the visualisation.
func nemesisAnnotations(events []history.Event) []porcupine.Annotation {
	var out []porcupine.Annotation
	open := map[string]time.Duration{}
	for _, e := range events {
		switch {
		case e.Process == history.Nemesis && e.F == history.Start:
			open[e.Fault] = e.Began()
		case e.Process == history.Nemesis && e.F == history.Stop:
			if t, ok := open[e.Fault]; ok {
				out = append(out, porcupine.Annotation{Tag: "nemesis", Start: int64(t), End: int64(e.Time),
					Description: e.Fault, Details: strings.Join(e.Targets, ","), BackgroundColor: "#fbe3d6"})
				delete(open, e.Fault)
			}
		case e.Process == history.Harness && e.F == history.Phase:
			out = append(out, porcupine.Annotation{Tag: "harness", Start: int64(e.Time), Description: "phase " + e.Fault})
		}
	}
	return out
}
