package client

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// A process that keeps thousands of sessions would send thousands of
// keepalives a second, one HTTP request each, and a leader's CPU goes to
// those requests rather than to the deadlines they move. So a Client's
// sessions hand their keepalives to its keeper, which holds each one for
// a moment (a tenth of the session's keepalive interval, at most
// maxLinger; a tenth of the pause before a retry) and sends those gathered in one POST /v1/sessions/keepalive
// (etcd multiplexes a client's leases on one LeaseKeepAlive stream for
// the same reason). Sessions answered together wake together a keepalive
// interval later, so they stay in one batch: the requests a client sends
// grow with its sessions divided by maxLinger's share of the interval,
// not with the sessions. A batch of one goes to the session's own
// keepalive path, and after a node answered that it does not know the
// batched call (an older build, in a rolling upgrade) each session's own
// call goes for a minute, then batches are tried again.

// maxLinger bounds how long a keepalive waits for others to join it.
const maxLinger = 500 * time.Millisecond

// maxKeepAliveBatch is the most sessions one batched keepalive names
// (the server's bound).
const maxKeepAliveBatch = 1000

// keeper gathers a client's keepalives into batches.
type keeper struct {
	c       *Client
	mu      sync.Mutex
	queue   []*keepReq
	timer   *time.Timer // sends the queue at flushAt; nil when none is set
	flushAt time.Time
	// singleUntil: a node did not serve the batched call (404
	// not_found: an older build, during a rolling upgrade); until then
	// each session is kept alive on its own, then batches are tried again.
	singleUntil time.Time
	// calls counts the calls being made (send), for tests.
	calls atomic.Int32
}

// olderNodeFor is how long the keeper sends single keepalives after a
// node answered that it does not serve the batched call.
const olderNodeFor = time.Minute

// keepReq is one session's keepalive waiting in the keeper.
type keepReq struct {
	id       string
	attempt  time.Duration // the session's keepaliveAttempt
	deadline time.Time     // when the session stops waiting for it
	done     chan keepResult
	// Under the keeper's mu: the call that sends it, once it is sent;
	// gone, when its session left before that (it is not sent).
	flight *flight
	gone   bool
}

// flight is one call the keeper makes for some of its requests. Its
// context ends by the earliest of their deadlines, and when the last of
// them leaves (their sessions closed), so that nothing the keeper does
// for sessions outlives them; done closes when the call has ended.
type flight struct {
	ctx    context.Context
	cancel context.CancelFunc
	left   atomic.Int32
	done   chan struct{}
}

// newFlight is the call for batch, to be made by send.
func newFlight(batch []*keepReq) *flight {
	deadline := batch[0].deadline
	for _, r := range batch[1:] {
		deadline = earlier(deadline, r.deadline)
	}
	f := &flight{done: make(chan struct{})}
	f.ctx, f.cancel = context.WithDeadline(context.Background(), deadline)
	f.left.Store(int32(len(batch)))
	for _, r := range batch {
		r.flight = f
	}
	return f
}

type keepResult struct {
	revoked []Revocation
	err     error
}

// keepAlive sends session id's keepalive with others due about now and
// returns its revocations, or the error its own keepalive would have
// answered (an *Error such as session_not_found, or the batch's failure:
// no leader, no node answered). It waits up to a tenth of pause (the
// time the session waited since its last try; at most maxLinger) for
// others to join. ctx bounds the wait; its deadline is the session's.
func (k *keeper) keepAlive(ctx context.Context, id string, pause, attempt time.Duration) ([]Revocation, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(pause) // every caller sets one
	}
	r := &keepReq{id: id, attempt: attempt, deadline: deadline, done: make(chan keepResult, 1)}
	k.add(r, min(pause/10, maxLinger))
	select {
	case res := <-r.done:
		return res.revoked, res.err
	case <-ctx.Done():
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The call ends by this deadline too (send): its answer, such as
		// the last no_leader a node gave, says more than the deadline.
		res := <-r.done
		return res.revoked, res.err
	}
	k.leave(r)
	return nil, ctx.Err()
}

// leave takes r out of the keeper, its session closed: unsent, it is
// not sent; sent, the last of its call's requests to leave cancels the
// call and waits for its end (at once, cancelled). A call that others
// still wait for goes on for them.
func (k *keeper) leave(r *keepReq) {
	k.mu.Lock()
	f := r.flight
	r.gone = f == nil
	k.mu.Unlock()
	if f != nil && f.left.Add(-1) == 0 {
		f.cancel()
		<-f.done
	}
}

// add queues r, to be sent within linger (at once when a batch is full).
func (k *keeper) add(r *keepReq, linger time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.queue = append(k.queue, r)
	if len(k.queue) >= maxKeepAliveBatch {
		go k.flush()
		return
	}
	at := time.Now().Add(linger)
	if k.timer != nil && !at.Before(k.flushAt) {
		return
	}
	if k.timer != nil {
		k.timer.Stop() // if it fired already, its flush finds what it finds
	}
	k.timer, k.flushAt = time.AfterFunc(linger, k.flush), at
}

// flush sends everything queued but what left, in batches of at most
// maxKeepAliveBatch (of one each while single calls are due).
func (k *keeper) flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	queue := k.queue
	k.queue, k.timer = nil, nil
	size := maxKeepAliveBatch
	if time.Now().Before(k.singleUntil) {
		size = 1
	}
	batch := make([]*keepReq, 0, min(len(queue), size))
	for i, r := range queue {
		if !r.gone {
			batch = append(batch, r)
		}
		if len(batch) > 0 && (len(batch) == size || i == len(queue)-1) {
			go k.send(newFlight(batch), batch)
			batch = make([]*keepReq, 0, min(len(queue)-i-1, size))
		}
	}
}

// send keeps batch's sessions alive through f and answers each of them.
// The call ends by the earliest of their deadlines, so every one is
// answered by its own, and each attempt lasts as long as the shortest
// of theirs, so that a hung node costs no session its TTL.
func (k *keeper) send(f *flight, batch []*keepReq) {
	k.calls.Add(1)
	defer close(f.done)
	defer k.calls.Add(-1)
	defer f.cancel()
	if len(batch) == 1 {
		k.sendOne(f.ctx, batch[0])
		return
	}
	attempt := batch[0].attempt
	for _, r := range batch[1:] {
		attempt = min(attempt, r.attempt)
	}
	ids := make([]string, len(batch))
	for i, r := range batch {
		ids[i] = r.id
	}
	var out wire.KeepAlivesResponse
	err := k.c.do(f.ctx, call{method: "POST", path: "/v1/sessions/keepalive", attempt: attempt,
		body: wire.KeepAlivesRequest{Sessions: ids}, out: &out})
	switch {
	case errors.Is(err, ErrNotFound):
		k.mu.Lock()
		k.singleUntil = time.Now().Add(olderNodeFor) // a node older than this client
		k.mu.Unlock()
		var wg sync.WaitGroup
		for _, r := range batch {
			wg.Go(func() { k.sendOne(f.ctx, r) })
		}
		wg.Wait()
	case err == nil && len(out.Sessions) != len(batch):
		err = &Error{Code: wire.CodeInternal, Message: "batched keepalive: the answer does not name every session"}
		fallthrough
	case err != nil:
		for _, r := range batch {
			r.done <- keepResult{err: err}
		}
	default:
		for i, r := range batch {
			r.done <- kept(out.Sessions[i])
		}
	}
}

// sendOne sends r's keepalive on the session's own path.
func (k *keeper) sendOne(ctx context.Context, r *keepReq) {
	var alive wire.KeepAliveResponse
	err := k.c.do(ctx, call{method: "POST", path: "/v1/sessions/" + url.PathEscape(r.id) + "/keepalive",
		attempt: r.attempt, out: &alive})
	r.done <- keepResult{revoked: alive.Revoked, err: err}
}

// kept is one session's part of a batched answer, as its own keepalive
// would have given it.
func kept(s wire.KeptSession) keepResult {
	if s.Error == nil {
		return keepResult{revoked: s.Revoked}
	}
	return keepResult{err: &Error{Code: s.Error.Code, Message: s.Error.Message, HTTPStatus: s.Status}}
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
