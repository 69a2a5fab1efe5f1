package cluster

import (
	"testing"
	"time"
)

// The leader writes no log format newer than every voter applies: while a
// voter of an older build (format 1) is in the configuration the format is
// 1, and once it is gone every voter's newest counts. The format is read
// on whichever node leads (an election may move the leadership at any
// time; a node that does not lead, or has not looked yet, knows none).
func TestLogFormatIsTheVotersOldest(t *testing.T) {
	n1 := startNodeWith(t, nodeOpts{log: 2}, "n1", 1)
	waitVoters(t, leader(t, n1), "n1")
	waitFor(t, 10*time.Second, "format 2 with n1 alone", func() bool { return leaderFormat(t, n1) == 2 })

	old := startNodeWith(t, nodeOpts{log: 1}, "n2", 0, n1.gossip())
	waitVoters(t, leader(t, n1, old), "n1", "n2")
	waitFor(t, 10*time.Second, "format 1 with an old voter", func() bool { return leaderFormat(t, n1, old) == 1 })

	n3 := startNodeWith(t, nodeOpts{log: 2}, "n3", 0, n1.gossip())
	waitVoters(t, leader(t, n1, old, n3), "n1", "n2", "n3")
	var got int
	waitFor(t, 10*time.Second, "a leader that knows the voters' format", func() bool {
		got = leaderFormat(t, n1, old, n3)
		return got != 0
	})
	if got != 1 {
		t.Fatalf("format %d while the old voter n2 is still in, want 1", got)
	}
	if _, c := old.get(); c.Leave(10*time.Second) != nil {
		t.Fatal("n2 could not leave")
	}
	old.kill()
	waitVoters(t, leader(t, n1, n3), "n1", "n3")
	waitFor(t, 10*time.Second, "format 2 once the old voter left", func() bool { return leaderFormat(t, n1, n3) == 2 })
}

// leaderFormat is the log format that the node leading among nodes
// writes: 0 while it has not looked yet.
func leaderFormat(t *testing.T, nodes ...*testNode) int {
	t.Helper()
	_, c := leader(t, nodes...).get()
	return c.LogFormat()
}
