//go:build lockd_faults

package raftnode

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/lockd/lockd/lockstate"
)

// The unsafe modes: each makes a node break one promise, so that the
// jepsen suite can prove the checker that guards it flags a node that
// does (its negative controls). TESTING ONLY: they exist only in a build
// made for that suite (go build -tags lockd_faults), never in lockd's
// production build. Config.SetUnsafe gives a node one.
const (
	// UnsafeWallClock stamps commands with the wall clock as this node
	// reads it, as lockd did before clock.go: the clock nemesis's negative
	// control. A step of the leader's clock moves every hold TTL.
	UnsafeWallClock = "wall-clock"
	// UnsafeLyingDisk answers a failed write of the raft log as if it had
	// succeeded, and does not stop the node: the disk nemesis's negative
	// control. Such a node acknowledges entries it has not persisted.
	UnsafeLyingDisk = "lying-disk"
	// UnsafeNoFsync opens raft.db without fsync (bolt's NoSync) and
	// fsyncs it only at every noFsyncEvery-th log write: the power
	// nemesis's negative control. Such a node acknowledges entries a
	// power loss takes back, and comes back with an older prefix of its
	// log (never fsyncing at all, it would come back with no raft.db to
	// speak of, refuse to start or catch up from the others, and lose
	// nothing the checkers could see). Bolt log store only.
	UnsafeNoFsync = "no-fsync"
	// UnsafeStaleSnapshot hands raft, at every snapshot, the state of the
	// snapshot before it (stale.go): the negative control of snapshots
	// during faults. A node restored from one misses entries.
	UnsafeStaleSnapshot = "stale-snapshot"
	// UnsafeNoHoldTTL drops the hold TTL of every acquire this node
	// proposes as leader, so the table keeps those holds until they are
	// released or their session ends: the negative control of the jepsen
	// hold-ttl checker.
	UnsafeNoHoldTTL = "no-hold-ttl"
	// UnsafeStaleProclaim gives a proclaim this node proposes as leader
	// to whoever leads the name (holds it with the smallest token) when
	// it is proposed, whatever session and token it came with: a deposed
	// leader's value shows under its successor's token. The negative
	// control of the jepsen election checker.
	UnsafeStaleProclaim = "stale-proclaim"
)

// SetUnsafe gives the node c configures the unsafe mode named (one of
// the Unsafe constants), instead of any it had.
func (c *Config) SetUnsafe(mode string) error {
	switch mode {
	case UnsafeWallClock:
		c.flaws = flaws{clock: func(c *tableClock) int64 { return c.wall() }}
	case UnsafeLyingDisk:
		c.flaws = flaws{logs: func(_ *Node, s raft.LogStore) (raft.LogStore, error) { return lyingLogs{s}, nil }}
	case UnsafeNoFsync:
		c.flaws = flaws{bolt: unsyncedBolt, logs: rarelySynced}
	case UnsafeStaleSnapshot:
		c.flaws = flaws{machine: func(m clockedFSM) raft.FSM { return &staleFSM{clockedFSM: m} }}
	case UnsafeNoHoldTTL:
		c.flaws = flaws{propose: dropHoldTTL}
	case UnsafeStaleProclaim:
		c.flaws = flaws{propose: staleProclaim}
	default:
		return fmt.Errorf("raftnode: no unsafe mode %q", mode)
	}
	return nil
}

// lyingLogs answers every failed write of its log store as a success
// (UnsafeLyingDisk), so that the node's watch (watchedLogs) never sees
// one.
type lyingLogs struct{ raft.LogStore }

// StoreLog stores log, and answers success whatever happened.
func (l lyingLogs) StoreLog(log *raft.Log) error {
	_ = l.LogStore.StoreLog(log)
	return nil
}

// StoreLogs stores logs, and answers success whatever happened.
func (l lyingLogs) StoreLogs(logs []*raft.Log) error {
	_ = l.LogStore.StoreLogs(logs)
	return nil
}

// DeleteRange deletes entries min..max, and answers success whatever
// happened.
func (l lyingLogs) DeleteRange(min, max uint64) error {
	_ = l.LogStore.DeleteRange(min, max)
	return nil
}

// IsMonotonic passes on the store's answer (see isMonotonic).
func (l lyingLogs) IsMonotonic() bool { return isMonotonic(l.LogStore) }

// unsyncedBolt opens raft.db without fsync (UnsafeNoFsync): raft-boltdb
// sets bolt's NoSync from its own, and a file grown unsynced is lost the
// same way.
func unsyncedBolt(o *raftboltdb.Options) {
	o.NoSync, o.BoltOptions.NoSync, o.BoltOptions.NoGrowSync = true, true, true
}

// rarelySynced fsyncs the bolt log store of n only at every
// noFsyncEvery-th write (UnsafeNoFsync).
func rarelySynced(n *Node, logs raft.LogStore) (raft.LogStore, error) {
	if n.wal != nil {
		return nil, errors.New("raftnode: " + UnsafeNoFsync + " needs the bolt log store")
	}
	return &rareSync{LogStore: logs, sync: n.bolt.Sync, every: noFsyncEvery}, nil
}

// dropHoldTTL takes the hold TTL off cmd, if it is an acquire
// (UnsafeNoHoldTTL), before it is proposed: the table never ends its
// holds by themselves.
func dropHoldTTL(_ *Node, cmd lockstate.Command) {
	if a, ok := cmd.(*lockstate.Acquire); ok {
		a.HoldTTL = 0
	}
}

// staleProclaim gives cmd, if it is a proclaim, to the session that
// leads its name in n's table (UnsafeStaleProclaim), with that hold's
// token and, so that the ACL check passes, that session's owner as its
// authority: the table then never sees a proclaim of a session that
// lost the name. Only the entry changes, so every node applies the
// same.
func staleProclaim(n *Node, cmd lockstate.Command) {
	p, ok := cmd.(*lockstate.Proclaim)
	if !ok {
		return
	}
	n.fsm.Read(func(t *lockstate.Table) {
		info, ok := t.Lock(p.Name)
		if !ok {
			return
		}
		h, ok := info.Leader()
		if !ok {
			return
		}
		p.Session, p.Token, p.Auth = h.Session, h.Token, h.Owner
	})
}
