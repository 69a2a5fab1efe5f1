// Package lockservice is the lock protocol of one node, free of any
// transport: typed calls (Acquire, Release, Surrender, Cancel, sessions,
// waiting on a request, reads) that own proposing through raft, the
// idempotent retry after an unknown outcome, waits and long-polls, the
// cancel after a wait ran out, and read-index. The HTTP API only
// translates JSON to these calls and their typed answers back.
//
// Clients name a session by its public key; the calls that act on a
// session take that key and find the table's session themselves.
//
// This package owns every error its caller can see, and says what each
// means (rqlite's store lists them the same way); the API maps only these
// to answers and imports nothing of raftnode:
//
//   - *lockstate.Error: the table (or validation before proposing) refused
//     the request; its Code is the API's error code. CodeCancelled is the
//     one code this package adds.
//   - *RetryError: this node cannot tell the request's outcome (no leader,
//     an unknown outcome, the wait was cut short); the client retries with
//     the same request id or re-attaches to it.
//   - errors wrapping ErrNoLeader, ErrUnknownOutcome or ErrAnswerLost (see
//     each), or a context error: the cluster could not decide in time.
//   - ErrRemoveLeader and ErrMemberAlive, from Cluster.RemoveMember.
package lockservice

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

// Defaults for Config's zero fields.
const (
	DefaultMaxWait        = 60 * time.Second
	DefaultCancelGrace    = 2 * time.Second
	DefaultProposeTimeout = 10 * time.Second
)

// maxUnknownRetries bounds how often an idempotent proposal whose outcome
// is unknown is sent again.
const maxUnknownRetries = 4

// CodeCancelled is the error code of an acquire that was cancelled
// (DELETE /v1/requests/{id}) while its session lives on.
const CodeCancelled lockstate.Code = "cancelled"

// Node is the raft side the service drives; *raftnode.Node implements it.
// Propose commits one command (forwarded to the leader when needed),
// ReadIndex makes the local table current for a linearizable read, and
// KeepAliveMany extends sessions' deadlines on the leader.
type Node interface {
	FSM() *fsm.FSM
	Propose(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error)
	ReadIndex(ctx context.Context) error
	KeepAliveMany(ctx context.Context, ids []lockstate.SessionID) ([]time.Duration, error)
}

var _ Node = (*raftnode.Node)(nil)

// The errors of the cluster that reach a caller. They are raftnode's own
// values, so errors.Is matches them wherever they were wrapped.
var (
	// ErrNoLeader: no leader was reachable before the command was sent to
	// one; nothing was done, and the caller may retry.
	ErrNoLeader = raftnode.ErrNoLeader
	// ErrBusy: too many calls already waited on this node for a leader;
	// this one was refused at once, nothing done. It wraps ErrNoLeader.
	ErrBusy = raftnode.ErrBusy
	// ErrUnknownOutcome: leadership changed while the command was in
	// flight; it may have been applied.
	ErrUnknownOutcome = raftnode.ErrUnknownOutcome
	// ErrAnswerLost: the command was applied, but the leader's answer did
	// not reach this node; it must not be repeated.
	ErrAnswerLost = raftnode.ErrAnswerLost
	// ErrRemoveLeader: RemoveMember named the leader, which must leave
	// (or lose its leadership) first.
	ErrRemoveLeader = raftnode.ErrRemoveLeader
	// ErrMemberAlive: RemoveMember named a member the leader's gossip sees
	// alive, which the leader would add back; it must leave, or be
	// stopped first.
	ErrMemberAlive = raftnode.ErrMemberAlive
)

// Cluster is the cluster's view that a caller reports besides the lock
// protocol; *raftnode.Node implements it.
type Cluster interface {
	Status() Status
	Servers() ([]Server, error)
	RemoveMember(ctx context.Context, id string) error
	DigestChecks() DigestChecks
	// Quorum is the voters this node reaches, as its raft sees them, and
	// whether its quorum is lost.
	Quorum() Quorum
}

var _ Cluster = (*raftnode.Node)(nil)

// Status is a node's raft state as raftnode reports it.
type Status = raftnode.Status

// Server is one server of the raft configuration.
type Server = raftnode.Server

// Quorum is a node's count of the voters it reaches (raftnode.Quorum).
type Quorum = raftnode.Quorum

// DigestChecks is what the leader's comparison of the nodes' table
// digests found.
type DigestChecks = raftnode.DigestChecks

// Config configures a Service.
type Config struct {
	Node   Node
	Logger hclog.Logger
	// MaxWait caps every wait (acquire, request long-poll, blocking
	// query); 0 means DefaultMaxWait.
	MaxWait time.Duration
	// CancelGrace is how long past the end of its wait an acquire that is
	// still pending (no leader ticked its deadline) waits before this node
	// proposes a cancel; 0 means DefaultCancelGrace.
	CancelGrace time.Duration
	// ProposeTimeout bounds one proposal, keepalive or read-index; 0
	// means DefaultProposeTimeout.
	ProposeTimeout time.Duration
	// ACL makes every call need a caller with a token (WithCaller); once
	// the cluster is bootstrapped the table demands one anyway.
	ACL bool
}

// Service is the lock protocol of one node. Its methods are safe for
// concurrent use. Close it to end the waits in flight.
type Service struct {
	cfg   Config
	node  Node
	fsm   *fsm.FSM
	log   hclog.Logger
	waits *requestWaits
	since sinceCache // entry times Since read

	waiting   atomic.Int64  // waits in flight, for metrics
	closing   chan struct{} // closed by Close: waits end with a RetryError
	closeOnce sync.Once
}

// New returns the service of cfg.Node.
func New(cfg Config) (*Service, error) {
	if cfg.Node == nil {
		return nil, errors.New("lockservice: Config.Node is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	setDefault(&cfg.MaxWait, DefaultMaxWait)
	setDefault(&cfg.CancelGrace, DefaultCancelGrace)
	setDefault(&cfg.ProposeTimeout, DefaultProposeTimeout)
	f := cfg.Node.FSM()
	s := &Service{cfg: cfg, node: cfg.Node, fsm: f, log: cfg.Logger.Named("locks"),
		waits: newRequestWaits(f), closing: make(chan struct{})}
	if lw, ok := cfg.Node.(leaderWaiter); ok {
		lw.SetAwaiter(s.answerAwait)
	}
	return s, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Close ends every wait in flight (each answers a RetryError, so that the
// client re-attaches on another node) and stops the event follower.
// Calls that do not wait keep working.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.waits.close()
	})
}

// MaxWait returns the cap on every wait.
func (s *Service) MaxWait() time.Duration { return s.cfg.MaxWait }

// Waiting returns the number of waits in flight on this node.
func (s *Service) Waiting() int64 { return s.waiting.Load() }

// RetryError says that this node cannot give request RequestID's outcome:
// no leader decided it (Pending false: it may or may not have been
// proposed), or the wait for it was cut short (Pending true). The client
// repeats the request with the same id, or re-attaches to it.
type RetryError struct {
	RequestID string
	Pending   bool
	Err       error // why
}

func (e *RetryError) Error() string {
	if e.Pending {
		return fmt.Sprintf("request %s is still pending: %v", e.RequestID, e.Err)
	}
	return fmt.Sprintf("request %s: %v", e.RequestID, e.Err)
}

// Unwrap returns why.
func (e *RetryError) Unwrap() error { return e.Err }

// errStoppedWaiting is why a wait ended before its request did.
var errStoppedWaiting = errors.New("this node stopped waiting (shutting down or client gone)")

// stillPending is the error of a request whose wait was cut short.
func stillPending(id string, why error) error {
	return &RetryError{RequestID: id, Pending: true, Err: why}
}

// unavailable reports whether err means the cluster did not decide (as
// opposed to refusing): the caller may retry.
func unavailable(err error) bool {
	return errors.Is(err, raftnode.ErrUnknownOutcome) || errors.Is(err, raftnode.ErrNoLeader) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// refusal returns a table error with a formatted message.
func refusal(code lockstate.Code, format string, args ...any) *lockstate.Error {
	return &lockstate.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
