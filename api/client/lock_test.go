package client_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/client"
)

func TestTryLockHeld(t *testing.T) {
	_, c := devFixture(t, nil)
	a, b := newSession(t, c, 10*time.Second), newSession(t, c, 10*time.Second)
	if _, err := a.Lock(ctxFor(t, 5*time.Second), "try/x"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := b.TryLock(ctxFor(t, 5*time.Second), "try/x")
	if !errors.Is(err, client.ErrLocked) || !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("TryLock of a held lock: %v, want ErrLocked/ErrTimeout", err)
	}
	var ae *client.Error
	if !errors.As(err, &ae) || ae.HTTPStatus != 409 {
		t.Fatalf("TryLock error %#v: want *client.Error with HTTP 409", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("TryLock took %v", d)
	}
	if err := a.Unlock(ctxFor(t, 5*time.Second), "try/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctxFor(t, 5*time.Second), "try/x"); err != nil {
		t.Fatalf("TryLock of a free lock: %v", err)
	}
	if err := a.Unlock(ctxFor(t, 5*time.Second), "try/x"); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("Unlock of a lock held by another session: %v, want ErrNotHeld", err)
	}
}

// Cancelling ctx while waiting cancels the request on the server.
func TestCancelRemovesWaiter(t *testing.T) {
	_, c := devFixture(t, nil)
	a, b := newSession(t, c, 10*time.Second), newSession(t, c, 10*time.Second)
	if _, err := a.Lock(ctxFor(t, 5*time.Second), "cancel/x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := goLock(func() (*client.Grant, error) { return b.Lock(ctx, "cancel/x") })
	eventually(t, 5*time.Second, "b waits", func() (bool, string) {
		ids, err := waiters(ctxFor(t, 5*time.Second), c, "cancel/x")
		return err == nil && len(ids) == 1, errString(err)
	})
	cancel()
	r := recvGrant(t, ch, 10*time.Second, "cancelled Lock")
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, %v; want context.Canceled", r.g, r.err)
	}
	ids, err := waiters(ctxFor(t, 5*time.Second), c, "cancel/x")
	if err != nil || len(ids) != 0 {
		t.Fatalf("waiters after cancel: %v, %v; want none", ids, err)
	}
	info, err := c.GetSession(ctxFor(t, 5*time.Second), b.ID())
	if err != nil || len(info.Pending) != 0 || len(info.Held) != 0 {
		t.Fatalf("session b after cancel: %+v, %v; want nothing pending or held", info, err)
	}
}

// A semaphore of limit 2 admits exactly two holders.
func TestSemaphoreLimit2(t *testing.T) {
	_, c := devFixture(t, nil)
	var ss []*client.Session
	for range 3 {
		ss = append(ss, newSession(t, c, 10*time.Second))
	}
	permit := func(limit int) []client.LockSpec { return []client.LockSpec{{Name: "sem/x", Weight: 1, Limit: limit}} }
	var tokens []uint64
	for _, s := range ss[:2] {
		g, err := s.Acquire(ctxFor(t, 5*time.Second), permit(2))
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, g.Token)
	}
	_, err := ss[2].Acquire(ctxFor(t, 500*time.Millisecond), permit(2))
	if err == nil {
		t.Fatal("third permit of a semaphore of 2 granted")
	}
	l, err := c.GetLock(ctxFor(t, 5*time.Second), "sem/x")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Holders) != 2 || l.Limit != 2 || len(l.Waiters) != 0 {
		t.Fatalf("semaphore %+v: want 2 holders, limit 2, no waiters", l)
	}
	if _, err := ss[2].Acquire(ctxFor(t, 5*time.Second), permit(3)); !errors.Is(err, client.ErrLimitMismatch) {
		t.Fatalf("other limit: %v, want ErrLimitMismatch", err)
	}
	// A freed permit goes to the waiter.
	ch := goLock(func() (*client.Grant, error) { return ss[2].Acquire(ctxFor(t, 10*time.Second), permit(2)) })
	if err := ss[0].Unlock(ctxFor(t, 5*time.Second), "sem/x"); err != nil {
		t.Fatal(err)
	}
	r := recvGrant(t, ch, 10*time.Second, "third acquire")
	if r.err != nil || r.g.Token <= max(tokens[0], tokens[1]) {
		t.Fatalf("third acquire after a release: %+v, %v", r.g, r.err)
	}
}

// A wait longer than the server's maximum long-poll goes on with new
// requests until ctx allows no more.
func TestWaitBeyondServerMaxWait(t *testing.T) {
	t.Parallel() // mostly waiting: overlap with the others
	_, c := devFixture(t, func(cfg *api.Config) { cfg.MaxWait = 500 * time.Millisecond })
	a, b := newSession(t, c, 10*time.Second), newSession(t, c, 10*time.Second)
	ga, err := a.Lock(ctxFor(t, 5*time.Second), "long/x")
	if err != nil {
		t.Fatal(err)
	}
	ch := goLock(func() (*client.Grant, error) { return b.Lock(ctxFor(t, 20*time.Second), "long/x") })
	time.Sleep(1500 * time.Millisecond) // three server waits
	select {
	case r := <-ch:
		t.Fatalf("Lock returned while the lock was held: %+v, %v", r.g, r.err)
	default:
	}
	if err := a.Unlock(ctxFor(t, 5*time.Second), "long/x"); err != nil {
		t.Fatal(err)
	}
	r := recvGrant(t, ch, 10*time.Second, "long Lock")
	if r.err != nil || r.g.Token <= ga.Token {
		t.Fatalf("long Lock: %+v, %v (a's token %d)", r.g, r.err, ga.Token)
	}
	// With a deadline, it ends with the timeout once the deadline passes.
	start := time.Now()
	_, err = a.Lock(ctxFor(t, 1200*time.Millisecond), "long/x")
	if !errors.Is(err, client.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with a deadline: %v", err)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Fatalf("Lock with a 1.2s deadline returned after %v", d)
	}
	if ids, err := waiters(ctxFor(t, 5*time.Second), c, "long/x"); err != nil || len(ids) != 0 {
		t.Fatalf("waiters after the deadline: %v, %v", ids, err)
	}
}

// Reentrant holds, RLock sharing, multi-lock any, surrender.
func TestReadSharedMultiSurrender(t *testing.T) {
	_, c := devFixture(t, nil)
	a, b := newSession(t, c, 10*time.Second), newSession(t, c, 10*time.Second)
	ctx := ctxFor(t, 20*time.Second)
	if _, err := a.RLock(ctx, "rw/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RLock(ctx, "rw/x"); err != nil {
		t.Fatalf("second reader: %v", err)
	}
	g, err := b.Acquire(ctx, []client.LockSpec{{Name: "rw/x"}, {Name: "rw/y"}}, client.RequireAny, client.Wait(0))
	if err != nil || len(g.Locks) != 1 || g.Locks[0].Name != "rw/y" {
		t.Fatalf("any of rw/x (read-held by a) and rw/y: %+v, %v", g, err)
	}
	// b waits for rw/y's writer... a asks for rw/y; b surrenders it.
	ch := goLock(func() (*client.Grant, error) { return a.Lock(ctx, "rw/y") })
	eventually(t, 5*time.Second, "a waits for rw/y", func() (bool, string) {
		ids, err := waiters(ctx, c, "rw/y")
		return err == nil && len(ids) == 1, errString(err)
	})
	surrendered, err := b.Surrender(ctx, "rw/y")
	if err != nil || !surrendered {
		t.Fatalf("surrender: %v, %v", surrendered, err)
	}
	if r := recvGrant(t, ch, 10*time.Second, "a's lock after surrender"); r.err != nil || r.g.Token <= g.Token {
		t.Fatalf("a after surrender: %+v, %v", r.g, r.err)
	}
	valid, cur, err := c.Check(ctx, "rw/y", g.Token)
	if err != nil || valid || cur <= g.Token {
		t.Fatalf("check of b's old token: valid=%v current=%d err=%v", valid, cur, err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.State != "leader" {
		t.Fatalf("status %+v, %v", st, err)
	}
}

// Acquire with Wait ends with a definite ErrTimeout when the server's
// wait runs out, long before ctx, and leaves no waiter behind.
func TestAcquireWaitTimesOutOnTheServer(t *testing.T) {
	_, c := devFixture(t, nil)
	a, b := newSession(t, c, 10*time.Second), newSession(t, c, 10*time.Second)
	if _, err := a.Lock(ctxFor(t, 5*time.Second), "within/x"); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	_, err := b.Acquire(ctx, []client.LockSpec{{Name: "within/x"}}, client.Wait(300*time.Millisecond))
	if !errors.Is(err, client.ErrTimeout) || ctx.Err() != nil {
		t.Fatalf("Acquire with Wait of a held lock: %v (ctx %v), want ErrTimeout", err, ctx.Err())
	}
	info, err := c.GetLock(ctxFor(t, 5*time.Second), "within/x")
	if err != nil || len(info.Waiters) != 0 || len(info.Holders) != 1 {
		t.Fatalf("after the timeout: %+v, %v", info, err)
	}
	if err := a.Unlock(ctxFor(t, 5*time.Second), "within/x"); err != nil {
		t.Fatal(err)
	}
	g, err := b.Acquire(ctx, []client.LockSpec{{Name: "within/x"}}, client.Wait(time.Second))
	if err != nil || g.Token == 0 {
		t.Fatalf("Acquire with Wait of a free lock: %+v, %v", g, err)
	}
}

// A hold with a TTL ends by itself, never before the grant's Deadline:
// another session waiting for it is granted after the deadline, and the
// first session's release then finds nothing held.
func TestAcquireHoldTTL(t *testing.T) {
	_, c := devFixture(t, nil)
	a, b := newSession(t, c, 10*time.Second), newSession(t, c, 10*time.Second)
	ctx := ctxFor(t, 10*time.Second)
	ttlx := []client.LockSpec{{Name: "ttl/x"}}
	if _, err := a.Acquire(ctx, ttlx, client.HoldTTL(0)); err == nil {
		t.Fatal("a hold TTL of 0 was accepted")
	}
	if _, err := a.Acquire(ctx, nil); err == nil {
		t.Fatal("an acquire of no locks was accepted")
	}
	g, err := a.Acquire(ctx, ttlx, client.HoldTTL(700*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	deadline, ok := g.Deadline()
	if !ok {
		t.Fatal("a grant with a hold TTL has no deadline")
	}
	if _, ok := mustLock(t, b, ctx, "ttl/other").Deadline(); ok {
		t.Fatal("a grant without a hold TTL has a deadline")
	}
	if _, err := b.Lock(ctx, "ttl/x"); err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); now.Before(deadline) {
		t.Fatalf("granted to another session %v before the first one's deadline", deadline.Sub(now))
	}
	if err := a.Unlock(ctx, "ttl/x"); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("release after the hold TTL: %v, want ErrNotHeld", err)
	}
}

func mustLock(t *testing.T, s *client.Session, ctx context.Context, name string) *client.Grant {
	t.Helper()
	g, err := s.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSessionSurface: a Session has four ways to acquire, as etcd's and
// Consul's users know them — Lock, RLock, TryLock, and Acquire with
// options for everything else — so that a new feature is an option, not
// a fifth method.
func TestSessionSurface(t *testing.T) {
	grantT := reflect.TypeFor[*client.Grant]()
	var acquire []string
	st := reflect.TypeFor[*client.Session]()
	for i := range st.NumMethod() {
		m := st.Method(i)
		if m.Type.NumOut() == 2 && m.Type.Out(0) == grantT {
			acquire = append(acquire, m.Name)
		}
	}
	if want := []string{"Acquire", "Lock", "RLock", "TryLock"}; !slices.Equal(acquire, want) {
		t.Fatalf("Session's methods that return a *Grant: %v, want %v", acquire, want)
	}
}
