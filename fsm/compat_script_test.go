package fsm

import (
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/quorum"
)

// The script of the compatibility fixture (see compat_test.go): every
// command type, with the features a log can exercise, each in its own part
// of the name space. It runs only with -update; the checks in it only
// catch mistakes in the script itself.

const (
	rd = lockstate.Read
	wr = lockstate.Write
)

func spec(name string, m lockstate.Mode) lockstate.LockSpec {
	return lockstate.LockSpec{Name: name, Mode: m}
}

func semSpec(name string, weight, limit int) lockstate.LockSpec {
	return lockstate.LockSpec{Name: name, Mode: wr, Weight: weight, Limit: limit}
}

func specs(s ...lockstate.LockSpec) []lockstate.LockSpec { return s }

// ok applies cmd and stops the script if it fails.
func (r *compatRecorder) ok(cmd lockstate.Command) *lockstate.Result {
	r.t.Helper()
	res := r.apply(cmd)
	if res.Err != nil {
		r.t.Fatalf("%v: %T %+v: %v", r, cmd, cmd, res.Err)
	}
	return res
}

// refused applies cmd and stops the script unless it fails with code.
func (r *compatRecorder) refused(code lockstate.Code, cmd lockstate.Command) {
	r.t.Helper()
	if res := r.apply(cmd); res.Err == nil || res.Err.Code != code {
		r.t.Fatalf("%v: %T %+v: %+v, want %s", r, cmd, cmd, res, code)
	}
}

func (r *compatRecorder) session(c lockstate.CreateSession) lockstate.SessionID {
	r.t.Helper()
	if c.TTL == 0 {
		c.TTL = 10 * time.Second
	}
	return r.ok(&c).Session
}

// acquire applies c and stops the script unless the request ends up want.
func (r *compatRecorder) acquire(want lockstate.Status, c *lockstate.Acquire) *lockstate.RequestInfo {
	r.t.Helper()
	res := r.ok(c)
	if res.Request.Status != want {
		r.t.Fatalf("%v: acquire %+v: %s, want %s", r, c, res.Request.Status, want)
	}
	return res.Request
}

// status stops the script unless request id is in state want.
func (r *compatRecorder) status(id string, want lockstate.Status) {
	r.t.Helper()
	var info lockstate.RequestInfo
	var ok bool
	r.f.Read(func(t *lockstate.Table) { info, ok = requestByID(t, id) })
	if !ok || info.Status != want {
		r.t.Fatalf("%v: request %q: %+v, want %s", r, id, info, want)
	}
}

func (r *compatRecorder) tick(d time.Duration) *lockstate.Result {
	r.now += int64(d)
	return r.ok(&lockstate.Tick{})
}

func compatScript(r *compatRecorder) {
	compatSessions(r)
	compatModes(r)
	compatSemaphores(r)
	compatHierarchy(r)
	compatMulti(r)
	compatWaits(r)
	compatCancelSurrender(r)
	compatReleases(r)
	compatEndSessions(r)
	compatDeadlocks(r)
	compatCycles(r)
	compatPendingAtSnapshot(r)
}

// compatRandom appends n generated entries (gen_test.go) from seed.
func compatRandom(r *compatRecorder, seed uint64, n int) {
	g := newGen(rand.New(rand.NewPCG(seed, seed)))
	g.now = r.now
	for range n {
		cmd := g.next(r.f.FSM)
		r.now = g.now
		g.observe(cmd, r.apply(cmd))
	}
}

func compatSessions(r *compatRecorder) {
	r.session(lockstate.CreateSession{Name: "alpha", TTL: 10 * time.Second})
	r.session(lockstate.CreateSession{Name: "beta", TTL: 30 * time.Second, OnDeadlock: lockstate.SurrenderLock, LockDelay: 2 * time.Second})
	r.session(lockstate.CreateSession{Name: "ordered", TTL: time.Minute, OnDeadlock: lockstate.Abort, Ordered: true})
	r.session(lockstate.CreateSession{TTL: lockstate.MaxTTL, LockDelay: lockstate.MaxLockDelay})
	for _, c := range []lockstate.CreateSession{
		{TTL: time.Millisecond},
		{TTL: lockstate.MaxTTL + 1},
		{TTL: time.Minute, LockDelay: -1},
		{TTL: time.Minute, LockDelay: lockstate.MaxLockDelay + 1},
		{TTL: time.Minute, Name: strings.Repeat("s", lockstate.MaxSessionName+1)},
		{TTL: time.Minute, OnDeadlock: "panic"},
	} {
		r.refused(lockstate.CodeInvalid, &c)
	}
	r.refused(lockstate.CodeNoSession, &lockstate.CloseSession{Session: 999})
	r.refused(lockstate.CodeNoSession, &lockstate.ExpireSession{Session: 999})
}

// compatModes: shared reads, a queued write, reentrancy, upgrades, ordered
// locking, idempotent retries.
func compatModes(r *compatRecorder) {
	a, b, c := r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("rw/x", rd))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: b, Locks: specs(spec("rw/x", rd)), RequestID: "b-read"})
	w := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("rw/x", wr)), Wait: 5 * time.Second, RequestID: "c-write"})
	r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("rw/x", wr)), Wait: 5 * time.Second, RequestID: "c-write"}) // a retry
	r.refused(lockstate.CodeInvalid, &lockstate.Acquire{Session: a, Locks: specs(spec("rw/x", wr)), RequestID: "c-write"})
	r.ok(&lockstate.Release{Session: a, Name: "rw/x"})
	r.ok(&lockstate.Release{Session: b, RequestID: "b-read"})
	r.status(w.ID, lockstate.Granted)
	r.ok(&lockstate.Release{Session: c, RequestID: "c-write"})

	// Reentrancy: two holds, released one at a time.
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("rw/y", wr))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("rw/y", wr)), HoldTTL: time.Second})
	r.ok(&lockstate.Release{Session: a, Name: "rw/y"})
	r.ok(&lockstate.Release{Session: a, Name: "rw/y"})

	// Upgrades: granted at once for the only holder, queued behind another.
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("rw/z", rd))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("rw/z", wr))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: b, Locks: specs(spec("rw/u", rd))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: c, Locks: specs(spec("rw/u", rd))})
	up := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("rw/u", wr)), Wait: time.Minute})
	r.ok(&lockstate.Release{Session: c, Name: "rw/u"})
	r.status(up.ID, lockstate.Granted)
	for _, n := range []string{"rw/z", "rw/z"} {
		r.ok(&lockstate.Release{Session: a, Name: n})
	}

	// Ordered locking.
	o := r.session(lockstate.CreateSession{Ordered: true})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: o, Locks: specs(spec("ord/b", wr))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: o, Locks: specs(spec("ord/c", rd))})
	r.refused(lockstate.CodePoorlyOrdered, &lockstate.Acquire{Session: o, Locks: specs(spec("ord/a", wr))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: o, Locks: specs(spec("ord/b", wr))}) // held: no order check
	r.ok(&lockstate.CloseSession{Session: o})
	r.ok(&lockstate.CloseSession{Session: c})
}

// compatSemaphores: weights, limits, a waiter that fits once permits free.
func compatSemaphores(r *compatRecorder) {
	a, b, c := r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(semSpec("sem/pool", 2, 3))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: b, Locks: specs(semSpec("sem/pool", 1, 3))})
	w := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(semSpec("sem/pool", 2, 0)), Wait: 10 * time.Second})
	r.refused(lockstate.CodeLimitMismatch, &lockstate.Acquire{Session: c, Locks: specs(semSpec("sem/pool", 1, 4))})
	r.refused(lockstate.CodeInvalid, &lockstate.Acquire{Session: c, Locks: specs(semSpec("sem/pool", 4, 0))})
	r.refused(lockstate.CodeInvalid, &lockstate.Acquire{Session: c, Locks: specs(semSpec("sem/new", 2, 0))})
	r.refused(lockstate.CodeInvalid, &lockstate.Acquire{Session: c, Locks: specs(lockstate.LockSpec{Name: "sem/pool", Mode: rd, Weight: 2})})
	r.refused(lockstate.CodeInvalid, &lockstate.Acquire{Session: c, Locks: specs(semSpec("sem/big", 1, lockstate.MaxLimit+1))})
	r.ok(&lockstate.Release{Session: a, Name: "sem/pool"})
	r.status(w.ID, lockstate.Granted)
	// A read on a semaphore takes one permit and excludes writers.
	rq := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: a, Locks: specs(lockstate.LockSpec{Name: "sem/pool", Mode: rd, Limit: 3}), Wait: time.Minute})
	r.ok(&lockstate.Release{Session: b, Name: "sem/pool"})
	r.ok(&lockstate.Release{Session: c, Name: "sem/pool"})
	r.status(rq.ID, lockstate.Granted)
	for _, s := range []lockstate.SessionID{a, b, c} {
		r.ok(&lockstate.CloseSession{Session: s})
	}
}

// compatHierarchy: a lock covers its descendants and is covered by its
// ancestors.
func compatHierarchy(r *compatRecorder) {
	a, b, c := r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{})
	d := r.session(lockstate.CreateSession{})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("h/db", wr))})
	w1 := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("h/db/orders/42", wr)), Wait: time.Minute})
	w2 := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("h/db/users", rd)), Wait: time.Minute})
	w3 := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: d, Locks: specs(spec("h/db/orders", rd)), Wait: time.Minute})
	r.ok(&lockstate.Release{Session: a, Name: "h/db"})
	r.status(w1.ID, lockstate.Granted)
	r.status(w2.ID, lockstate.Granted)
	r.status(w3.ID, lockstate.Pending)
	late := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("h", rd)), Wait: 2 * time.Second})
	r.tick(3 * time.Second)
	r.status(late.ID, lockstate.TimedOut)
	r.ok(&lockstate.Release{Session: b, Name: "h/db/orders/42"})
	r.status(w3.ID, lockstate.Granted)
	for _, s := range []lockstate.SessionID{a, b, c, d} {
		r.ok(&lockstate.CloseSession{Session: s})
	}
}

// compatMulti: all, any and majority requests.
func compatMulti(r *compatRecorder) {
	a, b, c := r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{})
	d := r.session(lockstate.CreateSession{})
	three := specs(spec("m/1", wr), spec("m/2", wr), spec("m/3", wr))
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("m/1", wr))})
	r.acquire(lockstate.TimedOut, &lockstate.Acquire{Session: b, Locks: three})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: b, Locks: three, Require: quorum.Any, RequestID: "b-any"})
	maj := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: three, Require: quorum.Majority, Wait: time.Minute})
	all := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: d, Locks: specs(spec("m/2", rd), spec("m/4", wr)), Require: quorum.All, Wait: time.Minute})
	r.ok(&lockstate.Release{Session: b, RequestID: "b-any"})
	r.status(maj.ID, lockstate.Granted)
	r.status(all.ID, lockstate.Pending)
	r.ok(&lockstate.Release{Session: c, RequestID: maj.ID})
	r.status(all.ID, lockstate.Granted)
	r.refused(lockstate.CodeNotHeld, &lockstate.Release{Session: c, RequestID: maj.ID})
	for _, s := range []lockstate.SessionID{a, b, c, d} {
		r.ok(&lockstate.CloseSession{Session: s})
	}
}

// compatWaits: waits that time out on a Tick or on a later entry, hold
// TTLs, and content a table refuses.
func compatWaits(r *compatRecorder) {
	a, b := r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("w/x", wr)), HoldTTL: 5 * time.Second})
	short := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("w/x", wr)), Wait: time.Second})
	long := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("w/x", rd)), Wait: 10 * time.Second, RequestID: "b-long"})
	r.tick(1500 * time.Millisecond)
	r.status(short.ID, lockstate.TimedOut)
	r.tick(4 * time.Second) // the hold TTL ends: the long wait is granted
	r.status(long.ID, lockstate.Granted)
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: b, Locks: specs(spec("w/x", rd)), HoldTTL: 2 * time.Second}) // reentrant, shorter TTL
	r.now += int64(3 * time.Second)
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("w/y", wr))}) // holds kept: one grant had no TTL
	r.ok(&lockstate.Release{Session: b, Name: "w/x"})
	r.ok(&lockstate.Release{Session: b, Name: "w/x"})

	long2 := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("w/y", wr)), Wait: time.Second})
	r.now += int64(2 * time.Second)
	r.refused(lockstate.CodeNoRequest, &lockstate.Cancel{RequestID: "nope"}) // fires the deadline first
	r.status(long2.ID, lockstate.TimedOut)

	bad := []lockstate.Acquire{
		{Session: a},
		{Session: a, Locks: make([]lockstate.LockSpec, lockstate.MaxLocksPerReq+1)},
		{Session: a, Locks: specs(spec("a//b", wr))},
		{Session: a, Locks: specs(spec(strings.Repeat("n", lockstate.MaxNameLen+1), wr))},
		{Session: a, Locks: specs(spec(strings.Repeat("a/", lockstate.MaxSegments)+"a", wr))},
		{Session: a, Locks: specs(spec("a\x00b", wr))},
		{Session: a, Locks: specs(spec("w/q", wr), spec("w/q", rd))},
		{Session: a, Locks: specs(lockstate.LockSpec{Name: "w/q", Mode: 3})},
		{Session: a, Locks: specs(spec("w/q", wr)), Require: "most"},
		{Session: a, Locks: specs(spec("w/q", wr)), Wait: -1},
		{Session: a, Locks: specs(spec("w/q", wr)), Wait: lockstate.MaxWait + 1},
		{Session: a, Locks: specs(spec("w/q", wr)), HoldTTL: lockstate.MaxHoldTTL + 1},
		{Session: a, Locks: specs(spec("w/q", wr)), RequestID: "~x"},
		{Session: a, Locks: specs(spec("w/q", wr)), RequestID: "a/b"},
		{Session: a, Locks: specs(spec("w/q", wr)), RequestID: strings.Repeat("r", lockstate.MaxRequestIDLen+1)},
	}
	for i := range bad {
		r.refused(lockstate.CodeInvalid, &bad[i])
	}
	r.refused(lockstate.CodeNoSession, &lockstate.Acquire{Session: 999, Locks: specs(spec("w/q", wr))})
	r.ok(&lockstate.CloseSession{Session: a})
	r.ok(&lockstate.CloseSession{Session: b})
}

// compatCancelSurrender: cancels by id with and without a session, and
// surrenders with and without waiters.
func compatCancelSurrender(r *compatRecorder) {
	a, b, c := r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("cs/x", wr))})
	p1 := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("cs/x", wr)), Wait: time.Minute, RequestID: "b-1"})
	p2 := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("cs/x", rd)), Wait: time.Minute})
	r.refused(lockstate.CodeNoRequest, &lockstate.Cancel{Session: c, RequestID: "b-1"})
	r.ok(&lockstate.Cancel{Session: b, RequestID: "b-1"})
	r.ok(&lockstate.Cancel{RequestID: p2.ID}) // the table's own "~" id, any session
	r.ok(&lockstate.Cancel{RequestID: p1.ID}) // finished: says so
	r.status(p1.ID, lockstate.Cancelled)

	res := r.ok(&lockstate.Surrender{Session: a, Name: "cs/x"})
	if !res.Kept {
		r.t.Fatalf("%v: surrender without waiters: %+v", r, res)
	}
	w := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("cs/x/y", rd)), Wait: time.Minute})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("cs/x", wr))}) // count 2
	r.ok(&lockstate.Surrender{Session: a, Name: "cs/x"})
	r.status(w.ID, lockstate.Granted)
	r.refused(lockstate.CodeNotHeld, &lockstate.Surrender{Session: a, Name: "cs/x"})
	r.refused(lockstate.CodeNoSession, &lockstate.Surrender{Session: 999, Name: "cs/x"})
	r.refused(lockstate.CodeInvalid, &lockstate.Surrender{Session: a, Name: "cs//x"})
	r.ok(&lockstate.Release{Session: b, Name: "cs/x/y"}) // a is granted again, count restored
	r.ok(&lockstate.Release{Session: a, Name: "cs/x"})
	r.ok(&lockstate.Release{Session: a, Name: "cs/x"})
	for _, s := range []lockstate.SessionID{a, b, c} {
		r.ok(&lockstate.CloseSession{Session: s})
	}
}

// compatReleases: the ways a release is refused.
func compatReleases(r *compatRecorder) {
	a, b := r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("rel/x", wr)), RequestID: "a-x"})
	r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("rel/x", wr)), Wait: time.Minute, RequestID: "b-x"})
	r.refused(lockstate.CodeNoSession, &lockstate.Release{Session: 999, Name: "rel/x"})
	r.refused(lockstate.CodeNotHeld, &lockstate.Release{Session: b, Name: "rel/x"})
	r.refused(lockstate.CodeInvalid, &lockstate.Release{Session: a, Name: "/"})
	r.refused(lockstate.CodeInvalid, &lockstate.Release{Session: a})
	r.refused(lockstate.CodeInvalid, &lockstate.Release{Session: a, Name: "rel/x", RequestID: "a-x"})
	r.refused(lockstate.CodeNoRequest, &lockstate.Release{Session: a, RequestID: "nope"})
	r.refused(lockstate.CodeNoRequest, &lockstate.Release{Session: a, RequestID: "b-x"})
	r.refused(lockstate.CodeNotHeld, &lockstate.Release{Session: b, RequestID: "b-x"})
	r.ok(&lockstate.Release{Session: a, RequestID: "a-x"})
	r.refused(lockstate.CodeNotHeld, &lockstate.Release{Session: a, RequestID: "a-x"})
	r.ok(&lockstate.CloseSession{Session: a})
	r.ok(&lockstate.CloseSession{Session: b})
}

// compatEndSessions: a close releases and cancels; an expiry also blocks
// the names for the session's lock-delay.
func compatEndSessions(r *compatRecorder) {
	a := r.session(lockstate.CreateSession{LockDelay: 2 * time.Second})
	b := r.session(lockstate.CreateSession{LockDelay: time.Second})
	c := r.session(lockstate.CreateSession{})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("ld/x", wr), spec("ld/y/z", rd))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: b, Locks: specs(spec("ld/q", wr))})
	q := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: a, Locks: specs(spec("ld/q", wr)), Wait: time.Minute})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: c, Locks: specs(spec("ld/c", wr))})
	r.acquire(lockstate.Pending, &lockstate.Acquire{Session: a, Locks: specs(spec("ld/c", wr)), Wait: time.Minute, HoldTTL: time.Hour})
	r.ok(&lockstate.CloseSession{Session: b}) // no lock-delay on a clean close
	r.status(q.ID, lockstate.Granted)
	r.ok(&lockstate.ExpireSession{Session: a})
	w1 := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("ld/x", wr)), Wait: time.Minute})
	w2 := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("ld/y", rd)), Wait: time.Minute})
	w3 := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("ld/q", wr)), Wait: time.Minute})
	r.tick(time.Second)
	r.status(w1.ID, lockstate.Pending)
	r.tick(1500 * time.Millisecond)
	r.status(w1.ID, lockstate.Granted)
	r.status(w2.ID, lockstate.Granted)
	r.status(w3.ID, lockstate.Granted)
	r.refused(lockstate.CodeNoSession, &lockstate.ExpireSession{Session: a})
	r.ok(&lockstate.ExpireSession{Session: c}) // no lock-delay set
}

// compatDeadlocks: the youngest session in a cycle is the victim; abort
// fails its request, surrender gives up its lock and queues again.
func compatDeadlocks(r *compatRecorder) {
	a, b := r.session(lockstate.CreateSession{}), r.session(lockstate.CreateSession{})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("dl/a", wr))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: b, Locks: specs(spec("dl/b", wr))})
	r.acquire(lockstate.Pending, &lockstate.Acquire{Session: a, Locks: specs(spec("dl/b", wr)), Wait: time.Minute})
	r.acquire(lockstate.Deadlock, &lockstate.Acquire{Session: b, Locks: specs(spec("dl/a", wr)), Wait: time.Minute})
	r.ok(&lockstate.CloseSession{Session: b})

	c := r.session(lockstate.CreateSession{})
	d := r.session(lockstate.CreateSession{OnDeadlock: lockstate.SurrenderLock})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: c, Locks: specs(spec("dl/c", wr))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: d, Locks: specs(spec("dl/d", rd))})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: d, Locks: specs(spec("dl/d", rd))}) // count 2
	wc := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("dl/d", wr)), Wait: time.Minute})
	wd := r.acquire(lockstate.Pending, &lockstate.Acquire{Session: d, Locks: specs(spec("dl/c", wr)), Wait: time.Minute})
	r.status(wc.ID, lockstate.Granted) // d surrendered dl/d and queued for it again
	r.status(wd.ID, lockstate.Pending)
	for _, s := range []lockstate.SessionID{a, c, d} {
		r.ok(&lockstate.CloseSession{Session: s})
	}
}

// compatCycles replays lockstate's reproducers of wait-for cycles closed
// other than by queueing a request (regressions of the deadlock detector).
func compatCycles(r *compatRecorder) {
	sessions := func(n int) []lockstate.SessionID {
		out := make([]lockstate.SessionID, n)
		for i := range out {
			out[i] = r.session(lockstate.CreateSession{})
		}
		return out
	}
	closeAll := func(ss []lockstate.SessionID) {
		for _, s := range ss {
			r.ok(&lockstate.CloseSession{Session: s})
		}
	}
	acq := func(want lockstate.Status, s lockstate.SessionID, wait time.Duration, l ...lockstate.LockSpec) {
		r.t.Helper()
		r.acquire(want, &lockstate.Acquire{Session: s, Locks: l, Wait: wait})
	}
	const g, p, m = lockstate.Granted, lockstate.Pending, time.Minute

	// Closed by the release of a name with a pending upgrade on it.
	ss := sessions(3)
	acq(g, ss[0], 0, spec("cy1/a", rd), spec("cy1/m", wr))
	acq(g, ss[2], 0, spec("cy1/x", wr))
	acq(p, ss[1], m, spec("cy1/a", wr), spec("cy1/m", wr))
	acq(p, ss[0], m, spec("cy1/a", wr), spec("cy1/x", wr))
	r.ok(&lockstate.Release{Session: ss[0], Name: "cy1/a"})
	closeAll(ss)

	// Closed by an upgrade granted ahead of an earlier waiter.
	ss = sessions(3)
	acq(g, ss[0], 0, spec("cy2/p", wr))
	acq(g, ss[1], 0, spec("cy2/m", wr))
	acq(g, ss[2], 0, spec("cy2/n", rd))
	acq(p, ss[1], m, spec("cy2/n", rd), spec("cy2/p", wr))
	acq(p, ss[2], m, spec("cy2/m", wr))
	acq(g, ss[2], m, spec("cy2/n", wr))
	closeAll(ss)

	// Closed by a grant to an earlier waiter on a name with a pending upgrade.
	ss = sessions(4) // p, x, y, q
	acq(g, ss[1], 0, spec("cy3/n", rd), spec("cy3/m", wr))
	acq(g, ss[0], 0, spec("cy3/n", rd))
	acq(g, ss[3], 0, spec("cy3/q", wr))
	acq(p, ss[2], m, spec("cy3/n", rd), spec("cy3/q", wr))
	acq(p, ss[1], m, spec("cy3/n", wr))
	acq(p, ss[2], m, spec("cy3/m", wr))
	r.ok(&lockstate.Release{Session: ss[3], Name: "cy3/q"})
	closeAll(ss)

	// Closed by a semaphore filling up.
	ss = sessions(4) // y, z, x, o
	acq(g, ss[0], 0, semSpec("cy4/sem", 1, 3))
	acq(g, ss[2], 0, spec("cy4/m", wr))
	acq(g, ss[3], 0, spec("cy4/r", wr))
	acq(p, ss[1], m, semSpec("cy4/sem", 1, 0), spec("cy4/r", wr))
	acq(p, ss[2], m, semSpec("cy4/sem", 2, 0))
	acq(p, ss[0], m, spec("cy4/m", wr))
	r.ok(&lockstate.Release{Session: ss[3], Name: "cy4/r"})
	closeAll(ss)
}

// compatPendingAtSnapshot leaves state for the mid-log snapshot to carry:
// holds with and without TTLs, waiters with deadlines and without, an
// upgrade waiter, a semaphore, a lock-delay, remembered requests.
func compatPendingAtSnapshot(r *compatRecorder) {
	a := r.session(lockstate.CreateSession{Name: "keeper", LockDelay: 3 * time.Second})
	b := r.session(lockstate.CreateSession{OnDeadlock: lockstate.SurrenderLock})
	c := r.session(lockstate.CreateSession{})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: a, Locks: specs(spec("snap/a", wr), spec("snap/r", rd)), RequestID: "keep-1"})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: b, Locks: specs(spec("snap/r", rd)), HoldTTL: 20 * time.Second})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: c, Locks: specs(semSpec("snap/sem", 2, 4))})
	r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("snap/a/x", rd)), Wait: 30 * time.Second})
	r.acquire(lockstate.Pending, &lockstate.Acquire{Session: b, Locks: specs(spec("snap/r", wr)), Wait: lockstate.MaxWait}) // an upgrade
	r.acquire(lockstate.Pending, &lockstate.Acquire{Session: c, Locks: specs(spec("snap/r", rd), spec("snap/t", wr)), Require: quorum.All, Wait: 5 * time.Second})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: c, Locks: specs(semSpec("snap/sem", 2, 4))})
	d := r.session(lockstate.CreateSession{LockDelay: 4 * time.Second})
	r.acquire(lockstate.Granted, &lockstate.Acquire{Session: d, Locks: specs(spec("snap/d", wr))})
	r.ok(&lockstate.ExpireSession{Session: d})
	r.now += int64(time.Second)
}
