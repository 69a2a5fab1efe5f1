package raftnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
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

// A data dir keeps its log store: a new one gets raft-wal unless bolt is
// asked for, one with a raft.db from before (no record, no wal/) keeps
// bolt, the store is recorded in raft.db, and opening a data dir with the
// other store, or an unknown name, is refused and changes nothing.
func TestLogStoreKept(t *testing.T) {
	oldBolt := func(t *testing.T, dir string) { writeRaftDB(t, dir, testDir) }
	made := func(store string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := openNodeWith(t, dir, store); err != nil {
				t.Fatalf("make the data dir with %q: %v", store, err)
			}
		}
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		store   string
		want    string // the store the node opened with, or "" if refused
		refusal string // in the error when refused
	}{
		{"new dir, default", nil, "", LogWAL, ""},
		{"new dir, wal", nil, LogWAL, LogWAL, ""},
		{"new dir, bolt", nil, LogBolt, LogBolt, ""},
		{"old bolt dir, default", oldBolt, "", LogBolt, ""},
		{"old bolt dir, bolt", oldBolt, LogBolt, LogBolt, ""},
		{"old bolt dir, wal", oldBolt, LogWAL, "", "--raft-log bolt"},
		{"bolt dir, default", made(LogBolt), "", LogBolt, ""},
		{"bolt dir, wal", made(LogBolt), LogWAL, "", "--raft-log bolt"},
		{"wal dir, default", made(""), "", LogWAL, ""},
		{"wal dir, bolt", made(""), LogBolt, "", "--raft-log wal"},
		{"wal dir lost its wal/", func(t *testing.T, dir string) {
			made("")(t, dir)
			if err := os.RemoveAll(filepath.Join(dir, walDir)); err != nil {
				t.Fatal(err)
			}
		}, "", "", "which is missing"},
		{"unknown store", nil, "lsm", "", `unknown log store "lsm"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			_, walBefore := os.Stat(filepath.Join(dir, walDir))
			err := openNodeWith(t, dir, tt.store)
			_, walAfter := os.Stat(filepath.Join(dir, walDir))
			switch {
			case tt.want == "" && (err == nil || !strings.Contains(err.Error(), tt.refusal)):
				t.Fatalf("opened with %q: %v, want a refusal saying %q", tt.store, err, tt.refusal)
			case tt.want == "" && (walBefore == nil) != (walAfter == nil):
				t.Fatal("the refused open added or removed the wal dir")
			case tt.want != "" && err != nil:
				t.Fatalf("opened with %q: %v", tt.store, err)
			case tt.want != "" && (walAfter == nil) != (tt.want == LogWAL):
				t.Fatalf("opened with %q: wal dir there: %v, want the %s store", tt.store, walAfter == nil, tt.want)
			}
			if tt.want != "" && recordedStore(t, dir) != tt.want {
				t.Fatalf("raft.db records %q, want %q", recordedStore(t, dir), tt.want)
			}
		})
	}
}

// recordedStore is the log store raft.db records for dir.
func recordedStore(t *testing.T, dir string) string {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	v, err := b.Get([]byte(logStoreKey))
	if err != nil {
		t.Fatalf("read the record: %v", err)
	}
	return string(v)
}
