// Package raftnode owns a lockd node's Raft instance: the log and stable
// stores (raft-boltdb/v2), snapshots, the TCP transport, proposing commands
// (stamped with the leader's clock, forwarded from followers to the leader),
// linearizable reads, and the leader's duties (session keepalive deadlines,
// expiry, ticks for the table's deadlines).
package raftnode

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// Errors a caller maps to API answers.
var (
	// ErrNoLeader: no leader is known or reachable; the client should retry
	// (HTTP 503 no_leader).
	ErrNoLeader = errors.New("raftnode: no leader")
	// ErrUnknownOutcome: the command may or may not have committed
	// (leadership lost, forwarding connection broken after sending). Retry
	// idempotently (same request_id); never report it as a failure.
	ErrUnknownOutcome = errors.New("raftnode: outcome unknown")
	// ErrSessionNotFound: a keepalive for a session the table does not have.
	ErrSessionNotFound = errors.New("raftnode: session not found")
)

// Config configures a Node.
type Config struct {
	ID       string // unique, stable node id (raft ServerID)
	DataDir  string // raft.db (bolt log + stable store) and snapshots/ live here
	RaftBind string // host:port the raft transport listens on
	// RaftAdvertise is the address other nodes dial; "" means RaftBind.
	RaftAdvertise string
	// PeerHTTP returns the HTTP address ("host:port") of a node by id, for
	// forwarding to the leader. The cluster package provides it.
	PeerHTTP func(id string) (string, bool)
	Logger   hclog.Logger
	// Timing scales raft's heartbeat/election/lease timeouts (1 = raft's
	// defaults; tests use smaller, loaded machines larger). 0 means 1.
	Timing float64
	// Now is the wall clock the leader stamps commands with; nil means
	// time.Now. Tests may move it.
	Now func() time.Time
	// SnapshotThreshold and TrailingLogs override raft's (0: defaults).
	SnapshotThreshold, TrailingLogs uint64
	SnapshotInterval                time.Duration
}

// Status is a node's view of raft.
type Status struct {
	ID           string
	State        string // "leader", "follower", "candidate", "shutdown"
	LeaderID     string
	LeaderRaft   string // leader's raft address
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64 // the FSM's own applied index
}

// Server is one member of the raft configuration.
type Server struct {
	ID    string
	Addr  string // raft address
	Voter bool
}

// Node is one lockd node's raft side.
type Node struct{ _ struct{} }

// Open starts a node on its data dir. A node with existing state rejoins
// its cluster; a fresh node waits to be bootstrapped or added.
func Open(cfg Config) (*Node, error) { panic("raftnode: Open not implemented yet") }

// FSM returns the node's state machine, for local reads and subscriptions.
func (n *Node) FSM() *fsm.FSM { panic("not implemented yet") }

// Propose commits cmd (on the leader, or forwarded to it) and returns the
// table's result and the entry's index. Errors: ErrNoLeader,
// ErrUnknownOutcome, context errors.
func (n *Node) Propose(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error) {
	panic("not implemented yet")
}

// ReadIndex returns once this node's FSM has applied every entry committed
// before the call (read-index: the leader confirms its leadership and
// commit index; a follower asks the leader), so a read of the local table
// after it is linearizable.
func (n *Node) ReadIndex(ctx context.Context) error { panic("not implemented yet") }

// KeepAlive extends a session's deadline on the leader (forwarded from a
// follower), answered only after the leader verified its leadership.
func (n *Node) KeepAlive(ctx context.Context, id lockstate.SessionID) (time.Duration, error) {
	panic("not implemented yet")
}

// Status returns this node's raft status.
func (n *Node) Status() Status { panic("not implemented yet") }

// Servers returns the raft configuration.
func (n *Node) Servers() ([]Server, error) { panic("not implemented yet") }

// HasState reports whether the node has raft state on disk (it must not be
// bootstrapped again).
func (n *Node) HasState() bool { panic("not implemented yet") }

// Bootstrap starts a new cluster with the given voters (this node among them).
func (n *Node) Bootstrap(servers []Server) error { panic("not implemented yet") }

// AddVoter adds (or re-adds with a new address) a voter; leader only.
func (n *Node) AddVoter(id, addr string) error { panic("not implemented yet") }

// RemoveServer removes a server from the configuration; leader only.
func (n *Node) RemoveServer(id string) error { panic("not implemented yet") }

// Handler serves the internal endpoints other nodes forward to
// (/internal/v1/...). The api package mounts it on the HTTP listener.
func (n *Node) Handler() http.Handler { panic("not implemented yet") }

// Shutdown stops the node: hands leadership over when it is the leader,
// then shuts raft and closes the stores.
func (n *Node) Shutdown(ctx context.Context) error { panic("not implemented yet") }
