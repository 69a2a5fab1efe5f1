package raftnode

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// readIndexLocal is the leader's half of a linearizable read (rqlite's
// waitForLinearizableRead): with a barrier committed in this term (lead
// ready), take the commit index, confirm leadership with a quorum, check
// the term did not move, and return the index the reader must wait for.
//
// The index returned is that of the last command at or before the commit
// index, not the commit index itself: the FSM's applied index counts only
// commands, so waiting for a trailing no-op, barrier or configuration
// entry would never end. No command lies between the two, so the table a
// reader sees is the same.
func (n *Node) readIndexLocal() (uint64, error) {
	l := n.lead.Load()
	if l == nil {
		return 0, fmt.Errorf("%w: leader not ready for reads", errRetry)
	}
	term := n.raft.CurrentTerm()
	if term != l.term {
		return 0, fmt.Errorf("%w: term moved on", errRetry)
	}
	commit := n.raft.CommitIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, fmt.Errorf("%w: verify leader: %w", errRetry, err)
	}
	if n.raft.CurrentTerm() != term {
		return 0, fmt.Errorf("%w: term moved on", errRetry)
	}
	return n.lastCommandAtOrBefore(commit)
}

// lastCommandAtOrBefore returns an index the FSM's applied index will
// reach once every command up to index is applied: the last command entry
// at or before index, or the FSM's applied index when no command lies
// between it and index. It reads the (cached) log backwards, usually only
// a few entries: commands in flight are found at once, and only no-ops,
// barriers and configuration changes follow the last command otherwise.
func (n *Node) lastCommandAtOrBefore(index uint64) (uint64, error) {
	applied := n.fsm.AppliedIndex()
	var entry raft.Log
	for i := index; i > applied; i-- {
		err := n.logs.GetLog(i, &entry)
		if errors.Is(err, raft.ErrLogNotFound) {
			// Compacted into a snapshot, which the FSM took after
			// applying it: every command up to i is applied by now.
			return n.fsm.AppliedIndex(), nil
		}
		if err != nil {
			return 0, fmt.Errorf("raftnode: read log entry %d: %w", i, err)
		}
		if entry.Type == raft.LogCommand {
			return i, nil
		}
	}
	return applied, nil
}
