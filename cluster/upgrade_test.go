package cluster

import (
	"testing"
	"time"
)

// The leader writes no log format newer than every voter applies: while a
// voter of an older build (format 1) is in the configuration the format is
// 1, and once it is gone every voter's newest counts.
func TestLogFormatIsTheVotersOldest(t *testing.T) {
	n1 := startNodeWith(t, nodeOpts{log: 2}, "n1", 1)
	waitVoters(t, leader(t, n1), "n1")
	_, c1 := n1.get()
	waitFor(t, 10*time.Second, "format 2 with n1 alone", func() bool { return c1.LogFormat() == 2 })

	old := startNodeWith(t, nodeOpts{log: 1}, "n2", 0, n1.gossip())
	waitVoters(t, leader(t, n1, old), "n1", "n2")
	waitFor(t, 10*time.Second, "format 1 with an old voter", func() bool { return c1.LogFormat() == 1 })

	n3 := startNodeWith(t, nodeOpts{log: 2}, "n3", 0, n1.gossip())
	waitVoters(t, leader(t, n1, old, n3), "n1", "n2", "n3")
	if got := c1.LogFormat(); got != 1 {
		t.Fatalf("format %d while the old voter n2 is still in, want 1", got)
	}
	if _, c := old.get(); c.Leave(10*time.Second) != nil {
		t.Fatal("n2 could not leave")
	}
	old.kill()
	waitVoters(t, leader(t, n1, n3), "n1", "n3")
	l := leader(t, n1, n3)
	_, lc := l.get()
	waitFor(t, 10*time.Second, "format 2 once the old voter left", func() bool { return lc.LogFormat() == 2 })
}
