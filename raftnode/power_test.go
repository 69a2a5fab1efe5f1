package raftnode

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/lockd/lockd/jepsen/faultfs/faultfstest"
)

// TestStoresSurvivePowerLoss opens a node on a faultfs mirror, which
// keeps apart what was not fsynced, and loses power: the stores' names
// must be durable, for either log store (a node that lost raft.db would
// come back without its log and vote).
func TestStoresSurvivePowerLoss(t *testing.T) {
	for _, store := range []string{LogBolt, LogWAL} {
		t.Run(store, func(t *testing.T) {
			fs, dir := faultfstest.MountTemp(t)
			if err := openNodeWith(t, dir, store); err != nil {
				t.Fatal(err)
			}
			if _, err := fs.PowerLoss(nil); err != nil {
				t.Fatal(err)
			}
			names := []string{boltFile, "snapshots"}
			if store == LogWAL {
				names = append(names, walDir)
			}
			for _, name := range names {
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					t.Errorf("%s after a power loss: %v", name, err)
				}
			}
			if err := openNodeWith(t, dir, store); err != nil {
				t.Errorf("open after a power loss: %v", err)
			}
		})
	}
}

// TestNoFsyncLosesAcknowledgedEntries: the log store of --unsafe
// no-fsync acknowledges entries a power loss takes back, and keeps the
// prefix it last fsynced; the store lockd runs keeps them all.
func TestNoFsyncLosesAcknowledgedEntries(t *testing.T) {
	for _, tt := range []struct {
		noFsync  bool
		wantLast uint64
	}{{false, 6}, {true, 4}} {
		t.Run(fmt.Sprintf("no-fsync=%v", tt.noFsync), func(t *testing.T) {
			fs, dir := faultfstest.MountTemp(t)
			path := filepath.Join(dir, boltFile)
			open := func() *raftboltdb.BoltStore {
				s, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: tt.noFsync,
					BoltOptions: &bbolt.Options{NoFreelistSync: true, NoSync: tt.noFsync, NoGrowSync: tt.noFsync}})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			bolt := open()
			if err := syncDir(dir); err != nil {
				t.Fatal(err)
			}
			var logs raft.LogStore = bolt
			if tt.noFsync {
				logs = &rareSync{LogStore: bolt, sync: bolt.Sync, every: 4}
			}
			for i := uint64(1); i <= 6; i++ {
				if err := logs.StoreLog(&raft.Log{Index: i, Term: 1, Data: []byte("cmd")}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := fs.PowerLoss(nil); err != nil { // closed after: as the process died, nothing more reaches the disk
				t.Fatal(err)
			}
			bolt.Close()
			if _, err := fs.PowerLoss(nil); err != nil { // what the close wrote is lost too
				t.Fatal(err)
			}
			bolt = open()
			defer bolt.Close()
			if last, err := bolt.LastIndex(); err != nil || last != tt.wantLast {
				t.Errorf("last index after a power loss: %d, %v; want %d", last, err, tt.wantLast)
			}
		})
	}
}

// TestSnapshotSurvivesPowerLoss: a node that took snapshots and compacted
// its log comes back after a power loss with its state. Raft fsyncs a
// snapshot's files and, once it renamed their directory into place, the
// snapshots directory, never the snapshot's own: its files' names would
// not be durable when raft compacts the log, and the node would come back
// with neither (its log no longer starting where a snapshot ends).
func TestSnapshotSurvivesPowerLoss(t *testing.T) {
	for _, store := range []string{LogWAL, LogBolt} {
		t.Run(store, func(t *testing.T) {
			fs, dir := faultfstest.MountTemp(t)
			c := newTestCluster(t, 1, func(cfg *Config) {
				cfg.DataDir = dir
				cfg.LogStore = store
				cfg.SnapshotThreshold = 16
				cfg.TrailingLogs = 8
				cfg.SnapshotInterval = 20 * time.Millisecond
			})
			n := c.nodes[0]
			s := createSession(t, n.get(), time.Hour)
			for i := range 100 {
				id := fmt.Sprintf("power-%d", i)
				acquire(t, n.get(), s, "power/"+id, id, 0, 0)
			}
			waitFor(t, 10*time.Second, "the log compacted", func() bool {
				first, err := n.get().logs.FirstIndex()
				return err == nil && first > 1
			})
			n.stop()
			if _, err := fs.PowerLoss(nil); err != nil {
				t.Fatal(err)
			}
			n.start()
			c.leader()
			if !hasSession(n.get(), s) {
				t.Error("the session is gone after the power loss")
			}
		})
	}
}
