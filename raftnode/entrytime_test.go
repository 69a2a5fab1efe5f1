package raftnode

import (
	"fmt"
	"testing"
	"time"
)

// EntryTime reads the time the leader stamped on an entry while the log
// holds it, on every node alike, and answers false once a snapshot has
// compacted the entry away.
func TestEntryTime(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotThreshold = 64
		cfg.TrailingLogs = 8
		cfg.SnapshotInterval = 20 * time.Millisecond
	})
	l := c.leader()
	before := time.Now()
	s := createSession(t, l.get(), time.Hour)
	after := time.Now()
	c.converged()
	for _, n := range c.nodes {
		ns, ok := n.get().EntryTime(uint64(s))
		if at := time.Unix(0, ns); !ok || at.Before(before) || at.After(after) {
			t.Fatalf("%s: EntryTime(%d) = %v %v, want a time in [%v, %v]", n.id, s, at, ok, before, after)
		}
	}
	if _, ok := l.get().EntryTime(l.get().raft.LastIndex() + 100); ok {
		t.Fatal("EntryTime of an index past the log's end answered")
	}
	// Enough entries to compact the session's away and push it out of
	// raft's log cache.
	for i := range logCacheSize + 100 {
		id := fmt.Sprintf("e-%d", i)
		acquire(t, l.get(), s, "entrytime/"+id, id, 0, 0)
	}
	waitFor(t, 10*time.Second, "the leader to compact its log past the session's entry", func() bool {
		first, err := l.get().logs.FirstIndex()
		return err == nil && first > uint64(s)
	})
	if at, ok := l.get().EntryTime(uint64(s)); ok {
		t.Fatalf("EntryTime(%d) after compaction = %v, want none", s, time.Unix(0, at))
	}
}
