package raftnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

const (
	boltFile        = "raft.db"
	snapshotsRetain = 2
	logCacheSize    = 512
)

// timing is raft's timeouts scaled by Config.Timing, and the waits derived
// from them.
type timing struct {
	heartbeat, election, lease, commit time.Duration
	// leaderWait bounds how long a call waits for a leader to be found,
	// elected or ready before it gives up with ErrNoLeader.
	leaderWait time.Duration
	// retryMin and retryMax bound the backoff between such attempts.
	retryMin, retryMax time.Duration
}

func newTiming(scale float64) timing {
	if scale <= 0 {
		scale = 1
	}
	def := raft.DefaultConfig()
	scaled := func(d, floor time.Duration) time.Duration {
		return max(time.Duration(float64(d)*scale), floor)
	}
	t := timing{
		// raft refuses timeouts under 5ms; scaling keeps
		// lease <= heartbeat <= election as the defaults have it.
		heartbeat: scaled(def.HeartbeatTimeout, 5*time.Millisecond),
		election:  scaled(def.ElectionTimeout, 5*time.Millisecond),
		lease:     scaled(def.LeaderLeaseTimeout, 5*time.Millisecond),
		commit:    scaled(def.CommitTimeout, time.Millisecond),
	}
	// A few election rounds: long enough to ride out a failover, short
	// enough that a cluster without quorum answers no_leader promptly.
	t.leaderWait = 3 * (t.heartbeat + t.election)
	t.retryMin = max(t.commit/5, time.Millisecond)
	t.retryMax = max(t.heartbeat/10, 10*time.Millisecond)
	return t
}

// openStores opens bolt (log + stable store), the snapshot store and the
// transport (transport.go). On error the caller closes whatever was opened.
func (n *Node) openStores() error {
	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("raftnode: data dir: %w", err)
	}
	path := filepath.Join(n.cfg.DataDir, boltFile)
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path: path,
		// NoFreelistSync skips writing bolt's freelist on every commit
		// (rqlite, Nomad; consul #15890); it is rebuilt on open. The
		// timeout turns a data dir locked by another process into an
		// error instead of a hang. NoSync stays false: fsync on.
		BoltOptions: &bbolt.Options{NoFreelistSync: true, Timeout: time.Second},
	})
	if err != nil {
		return fmt.Errorf("raftnode: open %s: %w", path, err)
	}
	n.bolt = bolt
	if n.logs, err = raft.NewLogCache(logCacheSize, bolt); err != nil {
		return fmt.Errorf("raftnode: log cache: %w", err)
	}
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(n.cfg.DataDir, snapshotsRetain, n.logger.Named("snapshot")); err != nil {
		return fmt.Errorf("raftnode: snapshot store: %w", err)
	}

	return n.openTransport()
}

// closeStores closes the transport and bolt, whichever are open.
func (n *Node) closeStores() error {
	var errs []error
	if n.trans != nil {
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftnode: close transport: %w", err))
		}
	}
	if n.bolt != nil {
		if err := n.bolt.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftnode: close bolt: %w", err))
		}
	}
	return errors.Join(errs...)
}

// raftConfig is raft's defaults with our id, logger, notify channel,
// scaled timeouts and snapshot overrides.
func (n *Node) raftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(n.cfg.ID)
	c.Logger = n.logger.Named("raft")
	c.NotifyCh = n.notifyCh
	c.HeartbeatTimeout = n.timing.heartbeat
	c.ElectionTimeout = n.timing.election
	c.LeaderLeaseTimeout = n.timing.lease
	c.CommitTimeout = n.timing.commit
	if n.cfg.SnapshotThreshold > 0 {
		c.SnapshotThreshold = n.cfg.SnapshotThreshold
	}
	if n.cfg.TrailingLogs > 0 {
		c.TrailingLogs = n.cfg.TrailingLogs
	}
	if n.cfg.SnapshotInterval > 0 {
		c.SnapshotInterval = n.cfg.SnapshotInterval
	}
	return c
}
