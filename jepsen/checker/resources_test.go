package checker

import (
	"testing"

	"github.com/lockd/lockd/jepsen/history"
)

// sample adds a Metrics event of node with the process started at start.
func (h *hb) sample(node string, start, rss, goroutines, fds int64) {
	h.add(history.Event{Type: history.Info, Process: history.Harness, F: history.Metrics, Node: node,
		Values: map[string][]int64{"process_resident_memory_bytes": {rss}, "go_goroutines": {goroutines},
			"process_open_fds": {fds}, "process_start_time_seconds": {start}}})
}

func TestResources(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name  string
		build func(h *hb)
		want  Verdict
	}{
		{"flat, with noise and a warm-up", func(h *hb) {
			for i := range int64(60) {
				rss := 40*mib + (i%5)*mib
				if i < 3 {
					rss = 10 * mib // warming up
				}
				h.sample("n1", 100, rss, 200+i%7, 30)
			}
		}, Valid},
		{"memory grows steadily", func(h *hb) {
			for i := range int64(60) {
				h.sample("n1", 100, 40*mib+i*4*mib, 200, 30)
			}
		}, Invalid},
		{"goroutines leak", func(h *hb) {
			for i := range int64(60) {
				h.sample("n1", 100, 40*mib, 200+i*20, 30)
			}
		}, Invalid},
		{"open files leak", func(h *hb) {
			for i := range int64(60) {
				h.sample("n1", 100, 40*mib, 200, 30+i*5)
			}
		}, Invalid},
		{"a restart starts over: the longest-lived process is judged", func(h *hb) {
			for range 20 {
				h.sample("n1", 100, 40*mib, 200, 30)
			}
			for i := range int64(40) {
				h.sample("n1", 200, 10*mib+i*mib/10, 100, 20) // fresh after a kill
			}
		}, Valid},
		{"too few samples to judge", func(h *hb) {
			h.sample("n1", 100, 40*mib, 200, 30)
		}, Unknown},
		{"no samples", func(h *hb) {}, Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &hb{}
			tt.build(h)
			if r := Resources(h.ev, Config{}); r.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s: %v %v", r.Verdict, tt.want, r.Anomalies, r.Counts)
			}
		})
	}
}
