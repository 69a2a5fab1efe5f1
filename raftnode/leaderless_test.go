package raftnode

import (
	"testing"
	"time"
)

// A call waits the full leaderWait for a leader during a failover, and
// only an election timeout once no leader has been known for longer.
func TestLeaderWaitNow(t *testing.T) {
	tm := newTiming(1)
	for _, tc := range []struct {
		leaderless time.Duration
		want       time.Duration
	}{
		{0, tm.leaderWait},
		{tm.leaderWait / 2, tm.leaderWait},
		{tm.leaderWait, tm.election},
		{time.Hour, tm.election},
	} {
		if got := tm.leaderWaitNow(tc.leaderless); got != tc.want {
			t.Errorf("leaderWaitNow(%v) = %v, want %v", tc.leaderless, got, tc.want)
		}
	}
}

// The leaderless clock starts at the first sight of no leader, keeps its
// start while none is known, and stops when one is.
func TestLeaderlessClock(t *testing.T) {
	var c leaderlessClock
	if c.since() != 0 {
		t.Fatal("a new clock runs")
	}
	c.see(false)
	first := c.start
	c.see(false)
	if c.start != first || c.since() < 0 {
		t.Fatalf("a second sight of no leader moved the start: %v -> %v", first, c.start)
	}
	c.see(true)
	if c.since() != 0 {
		t.Fatal("a known leader does not stop the clock")
	}
}
