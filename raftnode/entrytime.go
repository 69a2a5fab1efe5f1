package raftnode

import (
	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/fsm"
)

// EntryTime returns the table time (Unix nanoseconds; see "Table time"
// in clock.go) that the leader stamped on the command at index, while this node's log
// still holds it; false once a snapshot compacted it away, or for an
// index that is not a command. A grant's fencing token and a session's
// id are such indexes, so this is when a hold was granted or a session
// created. Committed entries never change, so every node that still holds
// the entry gives the same answer.
func (n *Node) EntryTime(index uint64) (int64, bool) {
	var l raft.Log
	if err := n.logs.GetLog(index, &l); err != nil || l.Type != raft.LogCommand {
		return 0, false
	}
	now, _, err := fsm.Decode(l.Data)
	if err != nil {
		return 0, false
	}
	return now, true
}

// TableTime is this node's count of table time now (Unix nanoseconds; 0
// before it applied anything): what EntryTime's answers are measured
// against. Table time keeps to real time while the cluster runs and
// stands still while no leader does, so an age is TableTime less an
// entry's time, not the wall clock less it.
func (n *Node) TableTime() int64 { return n.clock.estimate() }
