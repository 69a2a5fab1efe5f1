package checker

import (
	"slices"
	"sort"

	"github.com/lockd/lockd/jepsen/history"
)

// Resources is the soak check: a node's memory, goroutines and open
// files stay flat over a long run. For each node it takes the process
// that lived longest (a node restarted by a fault starts over) and, if it
// has enough samples, compares the median of its last third of samples
// with the median of its first third after the warm-up (the first tenth):
// growth beyond a factor plus a slack is a leak. Rates are not asserted
// (the machine is shared), only what should stay bounded.
func Resources(events []history.Event, cfg Config) Result {
	r := newResult("resources")
	byNode := map[string][]history.Event{}
	for _, e := range events {
		if e.F == history.Metrics && e.Process == history.Harness {
			byNode[e.Node] = append(byNode[e.Node], e)
		}
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	r.Counts["nodes"] = len(nodes)
	for _, n := range nodes {
		samples := longestLived(byNode[n])
		r.Counts["samples"] += len(samples)
		if len(samples) < minSoakSamples {
			r.Counts["too-few-samples"]++
			continue
		}
		for _, lim := range soakLimits {
			first, last := soakMedians(samples, lim.metric)
			if last > first*lim.factor+lim.slack {
				r.anomaly(cfg, "%s: %s grew from %.0f to %.0f (median of the first and last thirds of %d samples; limit %.1fx + %.0f)",
					n, lim.metric, first, last, len(samples), lim.factor, lim.slack)
			}
		}
	}
	switch {
	case r.Counts["samples"] == 0:
		r.Verdict, r.Note = Unknown, "no metrics sampled"
	case r.Counts["too-few-samples"] == len(nodes):
		// Nothing was judged: a valid verdict would claim what no sample shows.
		r.Verdict, r.Note = Unknown, "no node's process lived long enough to judge"
	}
	return r
}

// minSoakSamples is the fewest samples of one process worth judging.
const minSoakSamples = 12

// soakLimits bound each metric's growth: last ≤ first×factor + slack.
var soakLimits = []struct {
	metric        string
	factor, slack float64
}{
	{"process_resident_memory_bytes", 1.5, 32 << 20},
	{"go_goroutines", 1.5, 100},
	{"process_open_fds", 1.5, 50},
}

// longestLived returns the samples of the process (start time) that has
// the most of them.
func longestLived(samples []history.Event) []history.Event {
	byStart := map[int64][]history.Event{}
	var best int64
	for _, e := range samples {
		st := metric(e, "process_start_time_seconds")
		byStart[int64(st)] = append(byStart[int64(st)], e)
		if len(byStart[int64(st)]) > len(byStart[best]) {
			best = int64(st)
		}
	}
	return byStart[best]
}

// soakMedians returns the medians of name over the first third after
// the warm-up and over the last third of samples.
func soakMedians(samples []history.Event, name string) (first, last float64) {
	warm := len(samples) / 10
	rest := samples[warm:]
	third := len(rest) / 3
	return median(rest[:third], name), median(rest[len(rest)-third:], name)
}

func median(samples []history.Event, name string) float64 {
	vs := make([]float64, len(samples))
	for i, e := range samples {
		vs[i] = metric(e, name)
	}
	slices.Sort(vs)
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)/2]
}

// metric reads one sampled value of a Metrics event (0 when absent).
func metric(e history.Event, name string) float64 {
	if v := e.Values[name]; len(v) > 0 {
		return float64(v[0])
	}
	return 0
}
