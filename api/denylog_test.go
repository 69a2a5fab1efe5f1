package api

import (
	"testing"
	"time"
)

// Denials are logged at most once per token id per denialLogEvery, and
// the line says how many it stands for; another token gets its own line.
func TestDenialLogPerToken(t *testing.T) {
	t0 := time.Unix(1000, 0)
	steps := []struct {
		id    string
		after time.Duration
		log   bool
		count int
	}{
		{"a", 0, true, 1},
		{"a", time.Second, false, 0},
		{"a", 2 * time.Second, false, 0},
		{"b", 2 * time.Second, true, 1},
		{"", 3 * time.Second, true, 1}, // anonymous callers share one line
		{"", 4 * time.Second, false, 0},
		{"a", denialLogEvery + time.Second, true, 3},
		{"a", denialLogEvery + 2*time.Second, false, 0},
	}
	var d denialLimiter
	for i, s := range steps {
		n, ok := d.take(s.id, t0.Add(s.after))
		if ok != s.log || n != s.count {
			t.Fatalf("step %d (%q at +%v): logged %v with count %d, want %v with %d", i, s.id, s.after, ok, n, s.log, s.count)
		}
	}
}
