package raftnode

import (
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/lockd/lockd/lockstate"
)

// flaws are the places where a node can be made to break a promise on
// purpose. The jepsen suite's negative controls need nodes that do, to
// see its checkers flag them; only a build made for that suite (build
// tag lockd_faults) has the code that sets these fields, and the flaws
// themselves. A production build cannot reach them: every field stays
// nil, and a nil field leaves the node as written.
type flaws struct {
	// clock, if set, is the table time a leader reads (stamps on
	// commands, compares deadlines with) instead of its count
	// (tableClock.read).
	clock func(*tableClock) int64
	// bolt, if set, changes the options raft.db is opened with.
	bolt func(*raftboltdb.Options)
	// logs, if set, wraps the log store, beneath the watch for failed
	// writes (watchedLogs).
	logs func(*Node, raft.LogStore) (raft.LogStore, error)
	// machine, if set, is the state machine raft drives, made from the
	// node's.
	machine func(clockedFSM) raft.FSM
	// propose, if set, changes a command before the leader stamps it; it
	// may read the node's table.
	propose func(*Node, lockstate.Command)
}
