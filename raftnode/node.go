package raftnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

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
	// ErrRemoveLeader: RemoveMember was asked to remove the leader itself,
	// which must leave instead (handing leadership over first).
	ErrRemoveLeader = errors.New("raftnode: the leader cannot remove itself; make it leave")
	// ErrMemberAlive: RemoveMember was asked to remove a member that the
	// leader's membership would add back at once (gossip sees it alive),
	// so the removal would not last (SetRemoveRule). It must leave, or be
	// stopped first.
	ErrMemberAlive = errors.New("raftnode: the member is alive and would be added back; make it leave, or stop it first")
	// ErrBusy: so many calls already wait on this node to reach a leader
	// (Config.MaxLeaderWaits: none is known, or the calls to it failed
	// and are retried) that this one was refused at once; nothing was
	// done. It wraps ErrNoLeader: the caller retries, after a pause.
	ErrBusy = fmt.Errorf("%w: too many calls wait to reach a leader on this node", ErrNoLeader)
	// ErrNotLeader: a membership change (AddVoter, RemoveServer) was asked
	// of a node that is not the leader. It is raft's own error, so
	// errors.Is works with either name.
	ErrNotLeader = raft.ErrNotLeader
)

// Config configures a Node.
type Config struct {
	ID       string // unique, stable node id (raft ServerID)
	DataDir  string // raft.db (bolt log + stable store), wal/ and snapshots/ live here
	RaftBind string // host:port of the node port: raft and the internal RPC (transport.go)
	// RaftAdvertise is the address other nodes dial; "" means RaftBind.
	RaftAdvertise string
	// PeerServerTLS and PeerClientTLS secure the node port: the config it
	// accepts other nodes with (it must demand their node certificate)
	// and the one it dials them with. nil: plaintext, for --dev and
	// --insecure.
	PeerServerTLS, PeerClientTLS *tls.Config
	Logger                       hclog.Logger
	// Timing scales raft's heartbeat/election/lease timeouts (1 = raft's
	// defaults; tests use smaller, loaded machines larger). 0 means 1.
	Timing float64
	// Now is the node's clock: the leader stamps commands with it and
	// keeps session and table deadlines by it. nil means time.Now, whose
	// monotonic reading keeps session deadlines and table time safe from
	// wall-clock jumps (clock.go). Tests may move it.
	Now func() time.Time
	// ClockOffset, if set, is added to every reading of this node's wall
	// clock, and to nothing measured as a duration: a test hook standing
	// for a wall clock that steps (the jepsen clock nemesis), as a real
	// step leaves the monotonic clock alone.
	ClockOffset func() time.Duration
	// LogStore is where raft's log lives in a new data dir: LogBolt or
	// LogWAL ("": LogWAL). A data dir keeps the store it was made with;
	// naming the other one is refused.
	LogStore string
	// SnapshotThreshold and TrailingLogs override raft's (0: defaults).
	SnapshotThreshold, TrailingLogs uint64
	SnapshotInterval                time.Duration
	// StoreFailed is called, once, when a write to the raft log fails (a
	// full or failing disk). raft then refuses the entries, but a follower
	// may go on believing it holds one it does not (hashicorp/raft's
	// appendEntries), and never catch up: the node should stop, and a
	// restart reads its log back from disk (cmd/lockd exits with an
	// error, so that its supervisor starts it again). nil: only logged.
	StoreFailed func(error)
	// wrapLogs, if set, wraps the log store (tests inject failing
	// writes with it).
	wrapLogs func(raft.LogStore) raft.LogStore
	// noBatchedKeepAlive, if set, makes the node port answer batched
	// keepalives 404, as a build before them did (tests of a rolling
	// upgrade).
	noBatchedKeepAlive bool
	// flaws are the promises this node breaks on purpose (flaws.go):
	// none, but in a build for the jepsen suite's negative controls.
	flaws flaws
	// MaxLeaderWaits bounds the calls that wait on this node for a leader
	// at once (during an election, or while a new leader gets ready): one
	// more is refused at once with ErrBusy, so that a herd of clients
	// reconnecting after a failover is told to come back later (503 with
	// Retry-After) rather than all held until they time out.
	// 0: DefaultMaxLeaderWaits.
	MaxLeaderWaits int
	// Limits are stamped by this node, while it leads, into every session
	// and acquire it proposes (lockstate.Limits); zero fields: no limit.
	Limits lockstate.Limits
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
	LogStore     string // where raft's log lives in this data dir: LogWAL or LogBolt
}

// Server is one member of the raft configuration.
type Server struct {
	ID    string
	Addr  string // raft address
	Voter bool
}

// Node is one lockd node's raft side.
type Node struct {
	cfg    Config
	logger hclog.Logger
	// now is the node's one clock (Config.Now): every reading of the time
	// goes through it.
	now    func() time.Time
	clock  *tableClock // table time while this node leads
	timing timing

	fsm      *fsm.FSM
	raft     *raft.Raft
	bolt     *raftboltdb.BoltStore
	wal      *raftwal.WAL  // the log store when Config.LogStore is LogWAL
	uncached raft.LogStore // the log store under raft's LogCache (logs)
	walMeta  *metadb.BoltMetaDB
	logs     raft.LogStore // bolt or wal behind raft's LogCache
	snaps    raft.SnapshotStore
	trans    *raft.NetworkTransport
	port     *nodePort    // the node port raft and the internal RPC share
	internal *http.Server // the internal RPC, on the node port

	notifyCh     chan bool             // raft's NotifyCh; drained by monitorLeadership only
	observations chan raft.Observation // leader changes, for watchLeader
	// leaderless is since when this node has known no leader (zero while
	// it knows one): a call that finds the cluster in a long outage gives
	// up sooner (leaderCall).
	leaderless leaderlessClock
	observer   *raft.Observer

	// contacts is raft's contact with each peer, from which the quorum is
	// judged (contact.go); contactObs carries the observations it needs
	// (vote requests received, leaders named, peers removed).
	contacts        *contacts
	contactObs      chan raft.Observation
	contactObserver *raft.Observer
	gone            atomic.Pointer[func(string) bool] // SetGossipGone

	client  *http.Client // forwarded proposals; shared, keep-alive
	control *http.Client // the other calls to peers (clientFor)
	// awaits is AwaitOnLeader's own client, so that waits held open on the
	// leader never take the connections proposals need; awaitSlots
	// bounds them (await.go).
	awaits     *http.Client
	awaitSlots chan struct{}

	digests    digestState
	diverged   atomic.Pointer[string]            // what was compared, once the state diverged (digest.go)
	formatGate atomic.Pointer[func() int]        // SetLogFormat
	waits      leaderWaits                       // calls waiting for a leader (leaderCall)
	awaiter    atomic.Pointer[Awaiter]           // SetAwaiter
	joinRule   atomic.Pointer[func(string) bool] // SetJoinRule
	removeRule atomic.Pointer[func(string) bool] // SetRemoveRule
	raftUp     atomic.Pointer[raft.Raft]         // raft, once started: the node port's admission reads it

	// lead is the running leader duties once they are ready (barrier
	// committed in this term, sessions armed); nil otherwise.
	lead atomic.Pointer[leadership]
	// changes wakes callers waiting for a leader or for lead to be ready.
	changes fsm.Broadcast

	stopDuties chan chan (<-chan struct{}) // Shutdown asks the monitor to stop duties
	stopping   atomic.Bool                 // no new leader duties start once set
	shutdownCh chan struct{}               // closed after raft has shut down
	wg         sync.WaitGroup              // monitor, observer and leader loops

	shutdownOnce sync.Once
	shutdownErr  error

	storeFailOnce sync.Once // logStoreFailed
}

// Open starts a node on its data dir. A node with existing state rejoins
// its cluster; a fresh node waits to be bootstrapped or added.
func Open(cfg Config) (*Node, error) {
	if cfg.ID == "" || cfg.DataDir == "" || cfg.RaftBind == "" {
		return nil, errors.New("raftnode: Config needs ID, DataDir and RaftBind")
	}
	n := &Node{
		cfg:          cfg,
		logger:       cfg.Logger,
		now:          cfg.Now,
		timing:       newTiming(cfg.Timing),
		notifyCh:     make(chan bool, 64),
		observations: make(chan raft.Observation, 16),
		contactObs:   make(chan raft.Observation, 64),
		stopDuties:   make(chan chan (<-chan struct{})),
		shutdownCh:   make(chan struct{}),
	}
	n.waits.max = int64(cfg.MaxLeaderWaits)
	if n.logger == nil {
		n.logger = hclog.NewNullLogger()
	}
	if n.now == nil {
		n.now = time.Now
	}
	n.clock = newTableClock(cfg, n.now)
	// Raft's contact is timed by the clock raft reads, not by Config.Now,
	// which tests move.
	n.contacts = newContacts(time.Now, n.timing)
	n.fsm = fsm.New(fsm.Config{Logger: n.logger.Named("fsm")})
	n.client, n.control = n.newForwardClient(forwardConns), n.newForwardClient(controlConns)
	n.awaits, n.awaitSlots = n.newForwardClient(awaitConns), make(chan struct{}, awaitConns)

	if err := n.loadDiverged(); err != nil {
		return nil, err
	}
	if err := n.openStores(); err != nil {
		n.closeStores()
		return nil, err
	}
	var machine raft.FSM = clockedFSM{n.fsm, n.clock}
	if flaw := cfg.flaws.machine; flaw != nil {
		machine = flaw(clockedFSM{n.fsm, n.clock})
	}
	r, err := raft.NewRaft(n.raftConfig(), machine, n.logs, n.bolt, n.snaps, newContactTransport(n.trans, n.contacts))
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raftnode: start raft: %w", err)
	}
	n.raft = r
	n.raftUp.Store(r)

	n.observer = raft.NewObserver(n.observations, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(n.observer)
	n.contactObserver = raft.NewObserver(n.contactObs, false, contactObservation)
	r.RegisterObserver(n.contactObserver)

	n.wg.Add(4)
	go n.monitorLeadership()
	go n.watchLeader()
	go n.watchQuorum()
	go n.checkDigests()
	return n, nil
}

// FSM returns the node's state machine, for local reads and subscriptions.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// RaftAddr returns the raft address other nodes dial: RaftAdvertise, or the
// address the transport actually bound (useful with port 0).
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// Propose commits cmd (on the leader, or forwarded to it) and returns the
// table's result and the entry's index. Errors: ErrNoLeader,
// ErrUnknownOutcome, context errors.
func (n *Node) Propose(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error) {
	var (
		res   *lockstate.Result
		index uint64
	)
	err := n.leaderCall(ctx,
		func(ctx context.Context) (err error) {
			res, index, err = n.proposeLocal(ctx, cmd)
			return err
		},
		func(ctx context.Context, addr string) (err error) {
			res, index, err = n.forwardPropose(ctx, addr, cmd)
			return err
		})
	if err != nil {
		return nil, 0, err
	}
	return res, index, nil
}

// ReadIndex returns once this node's FSM has applied every entry committed
// before the call (read-index: the leader confirms its leadership and
// commit index; a follower asks the leader), so a read of the local table
// after it is linearizable.
func (n *Node) ReadIndex(ctx context.Context) error {
	var index uint64
	err := n.leaderCall(ctx,
		func(ctx context.Context) (err error) {
			index, err = n.readIndexLocal()
			return err
		},
		func(ctx context.Context, addr string) (err error) {
			index, err = n.forwardReadIndex(ctx, addr)
			return err
		})
	if err != nil {
		return err
	}
	if err := n.fsm.WaitApplied(ctx, index); err != nil {
		return fmt.Errorf("raftnode: read index %d: %w", index, err)
	}
	return nil
}

// KeepAlive extends a session's deadline on the leader (forwarded from a
// follower), answered only after the leader verified its leadership: a
// KeepAliveMany of one.
func (n *Node) KeepAlive(ctx context.Context, id lockstate.SessionID) (time.Duration, error) {
	ttls, err := n.KeepAliveMany(ctx, []lockstate.SessionID{id})
	switch {
	case err != nil:
		return 0, err
	case ttls[0] == 0:
		return 0, ErrSessionNotFound
	}
	return ttls[0], nil
}

// DefaultMaxLeaderWaits is Config.MaxLeaderWaits' default.
const DefaultMaxLeaderWaits = 2048

// MaxKeepAliveBatch bounds the sessions one KeepAliveMany names.
const MaxKeepAliveBatch = 1000

// KeepAliveMany extends the deadlines of several sessions on the leader
// (forwarded from a follower) after one leadership check. ttls[i] is
// ids[i]'s TTL, or 0 when that session is gone.
func (n *Node) KeepAliveMany(ctx context.Context, ids []lockstate.SessionID) ([]time.Duration, error) {
	if len(ids) > MaxKeepAliveBatch {
		return nil, fmt.Errorf("raftnode: %d sessions in one keepalive, at most %d", len(ids), MaxKeepAliveBatch)
	}
	var ttls []time.Duration
	err := n.leaderCall(ctx,
		func(ctx context.Context) (err error) {
			ttls, err = n.keepAliveManyLocal(ids)
			return err
		},
		func(ctx context.Context, addr string) (err error) {
			ttls, err = n.forwardKeepAliveMany(ctx, addr, ids)
			return err
		})
	if err != nil {
		return nil, err
	}
	return ttls, nil
}

// Status returns this node's raft status.
func (n *Node) Status() Status {
	addr, id := n.raft.LeaderWithID()
	return Status{
		ID:           n.cfg.ID,
		State:        strings.ToLower(n.raft.State().String()),
		LeaderID:     string(id),
		LeaderRaft:   string(addr),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.fsm.AppliedIndex(),
		LogStore:     n.logStore(),
	}
}

// logStore is the store raft's log is in: the one openLogStore chose
// for this data dir, which may not be Config.LogStore (a data dir keeps
// the store it was made with).
func (n *Node) logStore() string {
	if n.wal != nil {
		return LogWAL
	}
	return LogBolt
}

// HasState reports whether the node has raft state on disk (it must not be
// bootstrapped again).
func (n *Node) HasState() bool {
	if n.isShutdown() {
		return true // the stores may be closed; a stopped node must not be bootstrapped anyway
	}
	ok, err := raft.HasExistingState(n.logs, n.bolt, n.snaps)
	if err != nil {
		// Unreadable state is still state: never bootstrap over it.
		n.logger.Error("cannot tell whether raft state exists", "error", err)
		return true
	}
	return ok
}

// Shutdown stops the node: hands leadership over when it is the leader,
// then shuts raft and closes the stores.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutdownOnce.Do(func() { n.shutdownErr = n.shutdown(ctx) })
	return n.shutdownErr
}

func (n *Node) shutdown(ctx context.Context) error {
	// Leader duties stop first, so nothing is expired while leadership
	// moves and no duty waits on a raft that is going away.
	n.stopping.Store(true)
	reply := make(chan (<-chan struct{}), 1)
	n.stopDuties <- reply
	select {
	case <-<-reply:
	case <-ctx.Done():
		n.logger.Warn("leader duties did not stop in time", "error", ctx.Err())
	}

	if n.raft.State() == raft.Leader && n.otherVoters() {
		n.transferLeadership(ctx)
	}

	var errs []error
	if err := n.shutdownRaft(); err != nil {
		if errors.Is(err, errRaftHung) {
			// Its goroutines may still run (and still send heartbeats as
			// a leader would): closing the stores under them is worse
			// than leaving it all to the process's exit.
			return err
		}
		errs = append(errs, err)
	}
	// Close the transport at once: until then peers' RPCs to us are
	// accepted but never answered, and stall them for the I/O timeout.
	if n.internal != nil {
		_ = n.internal.Close()
	}
	if err := n.closeStores(); err != nil {
		errs = append(errs, err)
	}
	n.raft.DeregisterObserver(n.observer)
	n.raft.DeregisterObserver(n.contactObserver)
	close(n.shutdownCh)
	n.changes.Notify()
	n.wg.Wait()
	for _, hc := range []*http.Client{n.client, n.control, n.awaits} {
		hc.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// errRaftHung: raft did not shut down within raftShutdownWait.
var errRaftHung = errors.New("raftnode: raft did not shut down in time; the process must exit")

// raftShutdownWait bounds raft's own shutdown (its own bound: the
// caller's deadline may be spent on handing leadership over). A healthy
// raft stops within a second.
const raftShutdownWait = 15 * time.Second

// shutdownRaft shuts raft down, waiting at most raftShutdownWait:
// hashicorp/raft's Shutdown can hang (a replication pipeline to a peer
// that stopped answering), and a node that stays up half shut down keeps
// its peers from electing a leader (seen in the jepsen disk runs: a
// leader whose log write failed stepped down, hung in Shutdown, and its
// heartbeats went on). The caller then exits instead.
func (n *Node) shutdownRaft() error {
	err := boundedShutdown(raftShutdownWait, func() error { return n.raft.Shutdown().Error() })
	if errors.Is(err, errRaftHung) {
		n.logger.Error("raft did not shut down in time", "waited", raftShutdownWait)
	}
	return err
}

// boundedShutdown runs shutdown and waits for it at most wait: past it,
// errRaftHung (shutdown goes on in the background, if ever).
func boundedShutdown(wait time.Duration, shutdown func() error) error {
	done := make(chan error, 1)
	go func() { done <- shutdown() }()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("raftnode: shut down raft: %w", err)
		}
		return nil
	case <-timer.C:
		return errRaftHung
	}
}

// otherVoters reports whether the configuration has a voter besides us,
// someone leadership could move to.
func (n *Node) otherVoters() bool {
	future := n.raft.GetConfiguration()
	if future.Error() != nil {
		return false
	}
	for _, s := range future.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			return true
		}
	}
	return false
}

// transferLeadership hands leadership to another voter so the cluster does
// not sit out an election timeout; raft bounds the attempt itself.
func (n *Node) transferLeadership(ctx context.Context) {
	done := make(chan error, 1)
	go func() { done <- n.raft.LeadershipTransfer().Error() }()
	select {
	case err := <-done:
		if err != nil {
			n.logger.Warn("leadership transfer failed", "error", err)
			return
		}
		n.logger.Info("leadership transferred")
	case <-ctx.Done():
		n.logger.Warn("leadership transfer did not finish in time", "error", ctx.Err())
	}
}

// isShutdown reports whether Shutdown has shut raft down.
func (n *Node) isShutdown() bool {
	select {
	case <-n.shutdownCh:
		return true
	default:
		return n.raft.State() == raft.Shutdown
	}
}

// watchLeader turns raft's leader observations into wake-ups for callers
// waiting to find a leader. The observer never blocks raft: it drops when
// this channel is full, and waiters poll besides.
func (n *Node) watchLeader() {
	defer n.wg.Done()
	for {
		select {
		case <-n.observations:
			_, id := n.raft.LeaderWithID()
			n.leaderless.see(id != "")
			n.changes.Notify()
		case <-n.shutdownCh:
			return
		}
	}
}
