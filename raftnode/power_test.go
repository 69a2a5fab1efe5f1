package raftnode

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

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

// lastAfterPowerLoss opens raft.db on a faultfs mirror as a node with
// flaws f opens it (its options and log store, openStores), stores
// entries 1..n, loses power and returns the last index raft.db holds
// after.
func lastAfterPowerLoss(t *testing.T, f flaws, n uint64) uint64 {
	fs, dir := faultfstest.MountTemp(t)
	opts := boltOptions(filepath.Join(dir, boltFile))
	if f.bolt != nil {
		f.bolt(&opts)
	}
	bolt, err := raftboltdb.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := syncDir(dir); err != nil {
		t.Fatal(err)
	}
	var logs raft.LogStore = bolt
	if f.logs != nil {
		if logs, err = f.logs(&Node{bolt: bolt}, bolt); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(1); i <= n; i++ {
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
	if bolt, err = raftboltdb.New(boltOptions(opts.Path)); err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	last, err := bolt.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// TestBoltKeepsAcknowledgedEntries: raft.db as lockd opens it keeps
// every entry it acknowledged through a power loss.
func TestBoltKeepsAcknowledgedEntries(t *testing.T) {
	if last := lastAfterPowerLoss(t, flaws{}, 6); last != 6 {
		t.Errorf("last index after a power loss: %d, want 6", last)
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
