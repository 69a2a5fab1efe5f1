package raftnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A cluster with its log in raft-wal commits, keeps its log there (not in
// raft.db) and a restarted node comes back with it.
func TestWALCluster(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LogStore = LogWAL })
	leader := c.readyLeader()
	s := createSession(t, leader.get(), time.Minute)
	for i := range 20 {
		acquire(t, leader.get(), s, "job/"+string(rune('a'+i)), "", 0, 0)
	}
	follower := c.followers(leader)[0]
	index := c.converged()
	follower.stop()
	for _, tn := range c.nodes {
		segments, _ := filepath.Glob(filepath.Join(tn.dir, walDir, "*.wal"))
		if len(segments) == 0 {
			t.Fatalf("%s: no raft-wal segment in %s", tn.id, filepath.Join(tn.dir, walDir))
		}
	}
	follower.start()
	waitFor(t, 10*time.Second, "the restarted node to apply its log", func() bool {
		return follower.get().FSM().AppliedIndex() >= index
	})
	if !hasSession(follower.get(), s) {
		t.Fatal("the restarted node lost the session")
	}
	if last, err := follower.get().bolt.LastIndex(); err != nil || last != 0 {
		t.Fatalf("raft.db holds log entries up to %d (%v); the log belongs in wal/", last, err)
	}
	acquire(t, follower.get(), s, "job/after", "", 0, 0) // still commits, through the restarted follower
}

// A data dir keeps its log store: opening it with the other one is refused
// (it would start with an empty log), and so is an unknown name.
func TestLogStoreKept(t *testing.T) {
	boltDir := t.TempDir()
	writeRaftDB(t, boltDir, testDir)
	if err := openNodeWith(t, boltDir, LogWAL); err == nil || !strings.Contains(err.Error(), "--raft-log bolt") {
		t.Fatalf("bolt data dir opened with wal: %v", err)
	}
	if _, err := os.Stat(filepath.Join(boltDir, walDir)); err == nil {
		t.Fatal("the refused open made a wal dir")
	}

	walDirPath := t.TempDir()
	if err := openNodeWith(t, walDirPath, LogWAL); err != nil {
		t.Fatalf("new data dir with wal: %v", err)
	}
	if err := openNodeWith(t, walDirPath, LogBolt); err == nil || !strings.Contains(err.Error(), "--raft-log wal") {
		t.Fatalf("wal data dir opened with bolt: %v", err)
	}
	if err := openNodeWith(t, walDirPath, LogWAL); err != nil {
		t.Fatalf("wal data dir reopened with wal: %v", err)
	}
	if err := openNodeWith(t, t.TempDir(), "lsm"); err == nil || !strings.Contains(err.Error(), `unknown log store "lsm"`) {
		t.Fatalf("unknown store: %v", err)
	}
}
