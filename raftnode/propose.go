package raftnode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// errRetry marks a failure that left nothing behind (the node asked was
// not, or not yet, a ready leader; the leader could not be reached before
// anything was sent), so the call may simply be tried again.
var errRetry = errors.New("raftnode: not the leader")

// retryable reports whether err is safe to retry: the command was
// certainly not appended to the log.
func retryable(err error) bool {
	return errors.Is(err, errRetry) ||
		errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, raft.ErrEnqueueTimeout)
}

// leaderlessClock is since when a node has known no leader.
type leaderlessClock struct {
	mu    sync.Mutex
	start time.Time // zero while a leader is known
}

// see records whether a leader is known now.
func (c *leaderlessClock) see(known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case known:
		c.start = time.Time{}
	case c.start.IsZero():
		c.start = time.Now() // monotonic: only durations are read from it
	}
}

// since is how long no leader has been known; 0 while one is.
func (c *leaderlessClock) since() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.start.IsZero() {
		return 0
	}
	return time.Since(c.start)
}

func leaderKnown(r *raft.Raft) bool {
	_, id := r.LeaderWithID()
	return id != ""
}

// leaderWaitNow is how long a call waits for a leader, when none has been
// known for leaderless: the full leaderWait to ride out a failover, but
// only an election timeout in an outage that has lasted longer than that
// already (no majority: waiting longer only delays the answer).
func (t timing) leaderWaitNow(leaderless time.Duration) time.Duration {
	if leaderless >= t.leaderWait {
		return t.election
	}
	return t.leaderWait
}

// leaderCall runs an operation on the leader: local when this node leads,
// remote (with the leader's HTTP address) otherwise. While no leader is
// known, the one asked says it is not the leader, or it cannot be reached,
// it retries with backoff within ctx and timing.leaderWait, then gives up
// with ErrNoLeader. Other errors, above all ErrUnknownOutcome, return at
// once: only the caller can retry those idempotently. Once this node
// judges its quorum lost (contacts) it gives up at once, wrapping
// ErrQuorumLost too: no leader can be elected on its side, and a call
// forwarded to a leader that stopped answering is cut short then.
func (n *Node) leaderCall(ctx context.Context, local func(context.Context) error, remote func(context.Context, string) error) error {
	// The give-up is a timer, not a reading of the node's clock: it bounds
	// how long the caller waits, which a moved clock must not change.
	giveUp := time.NewTimer(n.timing.leaderWaitNow(n.leaderless.since()))
	defer giveUp.Stop()
	backoff := n.timing.retryMin
	waiting := false // this call counts in n.waits
	for {
		if n.isShutdown() {
			return fmt.Errorf("%w: node is shut down", ErrNoLeader)
		}
		changed := n.changes.Wait() // before looking, so no change is missed
		// Judged again when the last verdict was lost: it may have ended
		// since the last tick.
		if n.contacts.isLost() && n.Quorum().Lost {
			return fmt.Errorf("%w: %w", ErrNoLeader, ErrQuorumLost)
		}
		err := n.callLeaderOnce(ctx, local, remote)
		if err == nil || !retryable(err) {
			return err
		}
		n.leaderless.see(n.raft.State() == raft.Leader || leaderKnown(n.raft))
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		}
		if !waiting {
			if !n.waits.take() {
				return fmt.Errorf("%w (%d wait): %w", ErrBusy, n.waits.limit(), err)
			}
			defer n.waits.give()
			waiting = true
		}
		retry := time.NewTimer(backoff)
		select {
		case <-changed:
		case <-retry.C:
		case <-ctx.Done():
		case <-n.shutdownCh:
		case <-giveUp.C:
			retry.Stop()
			return fmt.Errorf("%w: %w", ErrNoLeader, err)
		}
		retry.Stop()
		backoff = min(2*backoff, n.timing.retryMax)
	}
}

// leaderWaits counts the calls waiting for a leader (leaderCall), up to
// max (Config.MaxLeaderWaits; 0: DefaultMaxLeaderWaits).
type leaderWaits struct {
	n   atomic.Int64
	max int64
}

// take counts one more waiting call, unless the most already wait.
func (w *leaderWaits) take() bool {
	if w.n.Add(1) > w.limit() {
		w.n.Add(-1)
		return false
	}
	return true
}

func (w *leaderWaits) give() { w.n.Add(-1) }

func (w *leaderWaits) limit() int64 { return cmp.Or(w.max, DefaultMaxLeaderWaits) }

func (n *Node) callLeaderOnce(ctx context.Context, local func(context.Context) error, remote func(context.Context, string) error) error {
	if n.raft.State() == raft.Leader {
		return local(ctx)
	}
	addr, id := n.raft.LeaderWithID()
	if id == "" || addr == "" {
		return fmt.Errorf("%w: no leader known", errRetry)
	}
	if string(id) == n.cfg.ID {
		// We just stepped down (or are about to lead): ask again.
		return fmt.Errorf("%w: leadership changing", errRetry)
	}
	// A leader that stops answering (frozen, cut off) would hold the call
	// until its deadline: it ends when the quorum is judged lost.
	ctx, release := n.contacts.untilLost(ctx)
	defer release()
	err := remote(ctx, string(addr)) // the leader's node port
	if err != nil && !errors.Is(err, ErrQuorumLost) && errors.Is(context.Cause(ctx), ErrQuorumLost) {
		err = fmt.Errorf("%w (%w)", err, ErrQuorumLost)
	}
	return err
}

// MaxEntryBytes bounds one command's log entry. The largest valid
// acquire (64 names of 512 bytes, a request id of 128) takes about
// 40 KiB.
const MaxEntryBytes = 128 << 10

// proposeLocal commits cmd on this node, which must be the leader; the
// leader, and only the leader, stamps the command with its clock. It
// refuses, without appending, what apply would refuse for its content or
// what is too large for the log: whoever proposed it, a forwarded
// proposal too, gets the same answer as the table would give, and nothing
// refused takes space in the log.
func (n *Node) proposeLocal(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error) {
	if n.raft.State() != raft.Leader {
		return nil, 0, errRetry
	}
	if err := cmd.Validate(); err != nil {
		return &lockstate.Result{Err: err}, 0, nil
	}
	// Table time starts once the term's barrier has applied the log
	// (clock.go): until the duties are ready for this term, retry.
	var now int64
	l := n.lead.Load()
	ok := l != nil && l.term == n.raft.CurrentTerm()
	if ok {
		now, ok = n.clock.read(l.term)
	}
	if !ok {
		return nil, 0, fmt.Errorf("%w: the leader is not ready yet", errRetry)
	}
	format := n.logFormat()
	if err := n.stamp(cmd, format); err != nil {
		return nil, 0, err
	}
	data, err := fsm.EncodeFormat(format, now, cmd)
	if errors.Is(err, fsm.ErrFormatTooOld) {
		// Nothing was appended: wait for the gate (a voter's upgrade, or
		// the leader learning its voters' builds) like for a leader.
		return nil, 0, fmt.Errorf("%w: %w", errRetry, err)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("raftnode: encode %T: %w", cmd, err)
	}
	if len(data) > MaxEntryBytes {
		return &lockstate.Result{Err: &lockstate.Error{Code: lockstate.CodeInvalid,
			Message: fmt.Sprintf("the command takes %d bytes, over %d", len(data), MaxEntryBytes)}}, 0, nil
	}
	return n.apply(ctx, data)
}

// apply appends an encoded command and waits for the FSM's answer. Raft
// batches concurrent applies into one disk write, so nothing here may
// serialise callers.
func (n *Node) apply(ctx context.Context, data []byte) (*lockstate.Result, uint64, error) {
	// The timeout only bounds enqueueing; ErrEnqueueTimeout means the entry
	// never reached the log.
	future := n.raft.Apply(data, n.timing.leaderWait)
	if ctx.Done() != nil {
		done := make(chan struct{})
		go func() {
			_ = future.Error()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			// Raft goes on with the entry; we just stop waiting for it.
			return nil, 0, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
		}
	}
	if err := future.Error(); err != nil {
		switch {
		case retryable(err):
			return nil, 0, err
		default:
			// The entry may commit under the next leader (consul #2893):
			// after a lost leadership, a shutdown, or a log write that
			// failed (a full or failing disk: the leader steps down, and a
			// store that wrote part of the batch may still hold it).
			return nil, 0, fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
		}
	}
	// Response is valid only once Error has returned.
	resp := future.Response()
	if res, ok := resp.(*lockstate.Result); ok {
		return res, future.Index(), nil
	}
	if err, ok := resp.(error); ok {
		return nil, 0, fmt.Errorf("raftnode: apply at index %d: %w", future.Index(), err)
	}
	return nil, 0, fmt.Errorf("raftnode: apply at index %d: unexpected FSM response %T", future.Index(), resp)
}

// SetLogFormat gives the leader the newest log entry format that every
// voter applies (the cluster's gossip knows each node's build), 0 while it
// does not know yet; the leader writes no newer one, and no session while
// it does not know. Until it is set, or when it says more than this
// build knows, the node writes fsm.NewestFormat: a node without a cluster
// (--dev, tests) has no older voter to wait for.
func (n *Node) SetLogFormat(format func() int) { n.formatGate.Store(&format) }

// logFormat is the format proposals are written in now.
func (n *Node) logFormat() fsm.Format {
	gate := n.formatGate.Load()
	if gate == nil {
		return fsm.NewestFormat
	}
	return min(fsm.Format((*gate)()), fsm.NewestFormat)
}
