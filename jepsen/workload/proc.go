package workload

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/history"
)

// opTimeout bounds a release or close, and what an acquire may take
// beyond its server-side wait (failover, re-attach).
const opTimeout = 20 * time.Second

// Proc is one process of the history: one lockd session, one operation
// at a time. A worker replaces it with a new Proc (new id, new session)
// when an operation's outcome is unknown or the session is lost.
type Proc struct {
	ID  int
	w   *worker
	s   *client.Session
	rng *rand.Rand

	retired  bool
	lostSeen bool // a lost event is recorded
	acquires int  // acquires invoked
	values   int  // values given (nextValue)
	// deadline is the current grant's, with Env.HoldTTL: the resource is
	// not used from deadlineMargin before it on.
	deadline time.Time
	// granted is when the current grant's ok was recorded.
	granted time.Time
}

// deadlineMargin is how long before its grant's deadline a holder stops
// starting resource operations: an operation takes a moment.
const deadlineMargin = 100 * time.Millisecond

// inTime reports whether the current grant surely still holds for a
// resource operation started now, and how long it still holds for.
func (p *Proc) inTime() (time.Duration, bool) {
	if p.deadline.IsZero() {
		return time.Duration(1<<63 - 1), true
	}
	left := time.Until(p.deadline) - deadlineMargin
	return left, left > 0
}

// Rand returns the worker's random source.
func (p *Proc) Rand() *rand.Rand { return p.rng }

// Worker returns the index of the worker running p.
func (p *Proc) Worker() int { return p.w.idx }

// Retired reports whether p can run no more operations.
func (p *Proc) Retired() bool { return p.retired }

func (p *Proc) env() *Env { return p.w.env }

func (p *Proc) record(e history.Event) history.Event {
	e.Process, e.Worker, e.Session = p.ID, p.w.idx, p.s.ID()
	e = p.env().Rec.Add(e)
	p.env().targets.note(e)
	return e
}

// alive checks the session before an operation: a session the client
// knows lost is recorded and retires the process.
func (p *Proc) alive() bool {
	if p.retired {
		return false
	}
	select {
	case <-p.s.Done():
		p.lost(p.s.Err())
		return false
	default:
		return true
	}
}

// lost records that the session is gone and retires the process.
func (p *Proc) lost(err error) {
	p.lostSeen = true
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	p.record(history.Event{Type: history.Info, F: history.Lost, Error: msg})
	p.retired = true
}

// Acquire records an acquire of locks that waits at most wait on the
// server. It returns the grant, or nil when not granted (the process is
// retired when the outcome is unknown).
func (p *Proc) Acquire(ctx context.Context, locks []history.Lock, require string, wait time.Duration) *client.Grant {
	if !p.alive() {
		return nil
	}
	specs := make([]client.LockSpec, len(locks))
	for i, l := range locks {
		specs[i] = client.LockSpec{Name: l.Name, Mode: client.Mode(l.Mode), Weight: l.Weight, Limit: l.Limit, Value: l.Value}
	}
	p.acquires++
	ttl := p.env().HoldTTL
	p.record(history.Event{Type: history.Invoke, F: history.Acquire, Locks: locks, Require: require, HoldTTL: ttl})
	actx, cancel := context.WithTimeout(ctx, wait+opTimeout)
	defer cancel()
	opts := []client.AcquireOption{client.Wait(wait), client.Require(require)} // "": all
	if ttl > 0 {
		opts = append(opts, client.HoldTTL(ttl))
	}
	g, err := p.s.Acquire(actx, specs, opts...)
	if err == nil {
		p.deadline, _ = g.Deadline()
		granted := make([]history.Granted, len(g.Locks))
		for i, gl := range g.Locks {
			granted[i] = history.Granted{Name: gl.Name, Mode: string(gl.Mode), Token: gl.Token}
		}
		p.record(history.Event{Type: history.OK, F: history.Acquire, Locks: locks, Require: require, HoldTTL: ttl,
			Granted: granted, Token: g.Token, Node: p.w.c.Leader()})
		p.granted = time.Now()
		return g
	}
	code := errCode(err)
	switch {
	case actx.Err() == nil && definiteAcquireFailure(code):
		p.record(history.Event{Type: history.Fail, F: history.Acquire, Locks: locks, Require: require, Error: code})
	default:
		p.record(history.Event{Type: history.Info, F: history.Acquire, Locks: locks, Require: require, Error: err.Error()})
		p.retired = true
		if isSessionGone(err) {
			p.lost(err)
		}
	}
	return nil
}

// definiteAcquireFailure: answers after which the request certainly
// holds nothing. A request cancelled while the worker still waited was
// cancelled by someone else (the client cancels only once its own
// deadline passed, and that is recorded as unknown): recorded as a fail
// "cancelled", which the Ownership checker looks for.
func definiteAcquireFailure(code string) bool {
	switch code {
	case wire.CodeTimeout, wire.CodeDeadlock, wire.CodeLimitMismatch, wire.CodePoorlyOrderedAccess,
		wire.CodeCancelled:
		return true
	}
	return false
}

// Release records the release of the holds g granted (by request id).
func (p *Proc) Release(ctx context.Context, g *client.Grant) {
	if !p.alive() { // the session is closed or lost: its holds end with it
		return
	}
	names := g.Names()
	p.record(history.Event{Type: history.Invoke, F: history.Release, Names: names})
	rctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err := p.s.Release(rctx, g)
	p.released(names, err)
}

// Unlock records the release of one hold of name.
func (p *Proc) Unlock(ctx context.Context, name string) {
	if !p.alive() {
		return
	}
	p.record(history.Event{Type: history.Invoke, F: history.Release, Names: []string{name}})
	rctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err := p.s.Unlock(rctx, name)
	p.released([]string{name}, err)
}

func (p *Proc) released(names []string, err error) {
	switch {
	case err == nil:
		p.record(history.Event{Type: history.OK, F: history.Release, Names: names})
	case errors.Is(err, client.ErrNotHeld) && p.env().HoldTTL > 0:
		// The hold TTL ended it; the session lives on (or its
		// keepalives will say otherwise).
		p.record(history.Event{Type: history.Fail, F: history.Release, Names: names, Error: wire.CodeNotHeld})
	case errors.Is(err, client.ErrNotHeld) || errors.Is(err, client.ErrSessionNotFound):
		// Only what was granted is released: the session lost it.
		p.record(history.Event{Type: history.Fail, F: history.Release, Names: names, Error: wire.CodeNotHeld})
		p.lost(err)
	default:
		p.record(history.Event{Type: history.Info, F: history.Release, Names: names, Error: err.Error()})
		p.retired = true
	}
}

// close ends the session; its holds end with it. A session the client
// already knows lost is recorded as lost first: its holds ended at the
// expiry, or end then, not at this close.
func (p *Proc) close(ctx context.Context) {
	if !p.lostSeen {
		select {
		case <-p.s.Done():
			p.lost(p.s.Err())
		default:
		}
	}
	p.retired = true
	p.record(history.Event{Type: history.Invoke, F: history.Close})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	err := p.s.Close(cctx)
	if err == nil && p.lostSeen {
		// Close of a lost session sends nothing, and a client gives up on
		// its keepalives a margin before the cluster expires the session,
		// which keeps its holds till then (longer while no leader counts
		// table time). Deleting it makes this close's ok mean that they
		// are gone, as the checkers take it (history.Lost).
		if _, err = p.w.c.DeleteSession(cctx, p.s.ID()); errors.Is(err, client.ErrSessionNotFound) {
			err = nil
		}
	}
	if err != nil {
		p.record(history.Event{Type: history.Info, F: history.Close, Error: err.Error()})
		return
	}
	p.record(history.Event{Type: history.OK, F: history.Close})
}

// Observe records a linearizable read of name's holders, read with the
// observer's token (Env.Observer), which sees every holder's session.
func (p *Proc) Observe(ctx context.Context, name string) {
	if !p.alive() {
		return
	}
	names := []string{name}
	p.record(history.Event{Type: history.Invoke, F: history.Observe, Names: names})
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	info, err := p.w.obs.GetLock(octx, name)
	switch {
	case errors.Is(err, client.ErrLockNotFound):
		p.record(history.Event{Type: history.OK, F: history.Observe, Names: names, Node: p.w.obs.Leader()})
	case err != nil:
		p.record(history.Event{Type: history.Fail, F: history.Observe, Names: names, Error: err.Error()})
	default:
		hs := make([]history.Holder, len(info.Holders))
		for i, h := range info.Holders {
			hs[i] = history.Holder{Session: h.Session, Mode: string(h.Mode), Token: h.Token}
		}
		p.record(history.Event{Type: history.OK, F: history.Observe, Names: names, Holders: hs, Node: p.w.obs.Leader()})
	}
}

// maybeObserve reads name's holders before one round in three.
func (p *Proc) maybeObserve(ctx context.Context, name string) {
	if p.rng.IntN(3) == 0 {
		p.Observe(ctx, name)
	}
}

// overstayEvery: with a hold TTL, one round in overstayEvery keeps its
// grant past its TTL (maybeOverstay).
const overstayEvery = 8

// maybeOverstay, with a hold TTL and one round in overstayEvery, keeps
// the grant g past its hold TTL, as a client that forgot it would: it
// uses nothing (the deadline has passed) and, once the latest end a
// correct lockd allows the hold outside faults has passed (the grant's
// ok + hold TTL + checker.HoldTTLSlack, and a second), observes each of
// its names; the caller then releases it, which should find nothing
// held. A lockd that kept the hold shows it to the hold-ttl checker.
func (p *Proc) maybeOverstay(ctx context.Context, g *client.Grant) {
	if p.deadline.IsZero() || p.rng.IntN(overstayEvery) != 0 {
		return
	}
	Sleep(ctx, time.Until(p.granted.Add(p.env().HoldTTL+checker.HoldTTLSlack+time.Second)))
	if ctx.Err() != nil {
		return
	}
	for _, n := range g.Names() {
		p.Observe(ctx, n)
	}
}

// ResRead reads register name of the resource under the hold (mode,
// token); ok false when the resource refused a stale token.
func (p *Proc) ResRead(name, mode string, token uint64) ([]int64, bool) {
	if _, ok := p.inTime(); !ok {
		return nil, false
	}
	g := []history.Granted{{Name: name, Mode: mode, Token: token}}
	p.record(history.Event{Type: history.Invoke, F: history.ResRead, Granted: g, Token: token})
	v, seq, err := p.env().Res.Read(name, mode, token)
	if err != nil {
		p.record(history.Event{Type: history.Fail, F: history.ResRead, Granted: g, Token: token, Error: "stale"})
		return nil, false
	}
	p.record(history.Event{Type: history.OK, F: history.ResRead, Granted: g, Token: token, Read: v, Seq: seq})
	return v, true
}

// ResAdd is the read-modify-write of the set-full workloads: read the
// register, pause here if the nemesis asks (a client stalled between its
// read and its write, as in a GC pause), write it back with one new
// element.
func (p *Proc) ResAdd(name string, token uint64) {
	v, ok := p.ResRead(name, "write", token)
	if !ok {
		return
	}
	p.PausePoint()
	elem := p.env().nextElement()
	g := []history.Granted{{Name: name, Mode: "write", Token: token}}
	p.record(history.Event{Type: history.Invoke, F: history.ResWrite, Granted: g, Token: token, Value: elem})
	seq, err := p.env().Res.Write(name, "write", token, append(v, elem))
	if err != nil {
		p.record(history.Event{Type: history.Fail, F: history.ResWrite, Granted: g, Token: token, Value: elem, Error: "stale"})
		return
	}
	p.record(history.Event{Type: history.OK, F: history.ResWrite, Granted: g, Token: token, Value: elem, Seq: seq})
}

// ResUse brackets a semaphore use of name, pausing inside if asked.
func (p *Proc) ResUse(name string, token uint64, work time.Duration) {
	left, ok := p.inTime()
	if !ok {
		return
	}
	work = min(work, left)
	g := []history.Granted{{Name: name, Mode: "write", Token: token}}
	for _, f := range []string{history.ResEnter, history.ResExit} {
		p.record(history.Event{Type: history.Invoke, F: f, Granted: g, Token: token})
		var seq uint64
		if f == history.ResEnter {
			seq, _ = p.env().Res.Enter(name)
			p.record(history.Event{Type: history.OK, F: f, Granted: g, Token: token, Seq: seq})
			time.Sleep(work)
			p.PausePoint()
			continue
		}
		seq, _ = p.env().Res.Exit(name)
		p.record(history.Event{Type: history.OK, F: f, Granted: g, Token: token, Seq: seq})
	}
}

// PausePoint stalls the whole client (its keepalives too) when the
// nemesis has asked for a client pause.
func (p *Proc) PausePoint() { p.env().Pauses.point(p) }

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// errCode is the API error code of err, or "".
func errCode(err error) string {
	var ae *client.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func isSessionGone(err error) bool {
	return errors.Is(err, client.ErrSessionNotFound) || errors.Is(err, client.ErrKeepaliveExpired) ||
		errors.Is(err, client.ErrSessionClosed)
}

// gate stalls every HTTP request of one worker's client while a client
// pause lasts: the process is frozen as a whole, keepalives included.
type gate struct {
	base http.RoundTripper

	mu    sync.Mutex
	until time.Time
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	g.mu.Lock()
	d := time.Until(g.until)
	g.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
		}
	}
	return g.base.RoundTrip(req)
}

func (g *gate) closeFor(d time.Duration) {
	g.mu.Lock()
	g.until = time.Now().Add(d)
	g.mu.Unlock()
}

// Pauses hands client-pause requests of the nemesis to the next worker
// that reaches a pause point while holding a lock.
type Pauses struct {
	mu      sync.Mutex
	pending *pauseReq
}

type pauseReq struct {
	d     time.Duration
	taken chan string
}

// Pause asks the next worker at a pause point to stall for d; it returns
// which process took it, or an error when none did before ctx ended.
func (ps *Pauses) Pause(ctx context.Context, d time.Duration) (string, error) {
	req := &pauseReq{d: d, taken: make(chan string, 1)}
	ps.mu.Lock()
	ps.pending = req
	ps.mu.Unlock()
	select {
	case who := <-req.taken:
		return who, nil
	case <-ctx.Done():
		ps.mu.Lock()
		if ps.pending == req {
			ps.pending = nil
		}
		ps.mu.Unlock()
		select {
		case who := <-req.taken:
			return who, nil
		default:
		}
		return "", errors.New("client pause: no client reached a pause point")
	}
}

func (ps *Pauses) point(p *Proc) {
	if ps == nil {
		return
	}
	ps.mu.Lock()
	req := ps.pending
	ps.pending = nil
	ps.mu.Unlock()
	if req == nil {
		return
	}
	p.w.gate.closeFor(req.d)
	req.taken <- "process-" + itoa(p.ID)
	time.Sleep(req.d)
}
