package raftnode

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// tableAwaiter is the Awaiter the lock service installs, reduced to what
// the tests need: wait on n's table until request id is no longer pending.
func tableAwaiter(n *Node) Awaiter {
	return func(ctx context.Context, id string, session lockstate.SessionID, created uint64, wait time.Duration) (lockstate.RequestInfo, bool) {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			changed := n.FSM().Changed()
			info, ok := request(n, id)
			if !ok || info.Session != session || info.Created != created {
				return info, false
			}
			if info.Status != lockstate.Pending {
				return info, true
			}
			select {
			case <-changed:
			case <-timer.C:
				return info, true
			case <-ctx.Done():
				return info, true
			}
		}
	}
}

// A follower's waiter hears of its grant from the leader: AwaitOnLeader
// stays blocked while the request is pending and answers with the grant
// the leader applied.
func TestAwaitOnLeaderHearsTheGrant(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	leader := c.readyLeader().get()
	follower := c.followers(c.readyLeader())[0].get()
	for _, tn := range c.live() {
		tn.get().SetAwaiter(tableAwaiter(tn.get()))
	}
	holder, waiter := createSession(t, leader, time.Minute), createSession(t, leader, time.Minute)
	held := acquire(t, leader, holder, "job", "r-held", 0, 0)
	pending := acquire(t, follower, waiter, "job", "r-wait", 30*time.Second, 0)
	if pending.Status != lockstate.Pending {
		t.Fatalf("second acquire: %s, want pending", pending.Status)
	}

	type answer struct {
		info  lockstate.RequestInfo
		final bool
		err   error
	}
	got := make(chan answer, 1)
	go func() {
		info, final, err := follower.AwaitOnLeader(context.Background(), pending, 20*time.Second)
		got <- answer{info, final, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("AwaitOnLeader answered while the request was pending: %+v", a)
	case <-time.After(300 * time.Millisecond):
	}
	propose(t, leader, &lockstate.Release{Session: holder, Name: "job"})
	a := <-got
	if a.err != nil || !a.final || a.info.Status != lockstate.Granted || a.info.Token <= held.Token {
		t.Fatalf("AwaitOnLeader = %+v, want a final grant with a token above %d", a, held.Token)
	}
}

// What AwaitOnLeader answers when it cannot help: on the leader itself,
// for a request the leader does not hold, and for one still pending when
// the wait ends.
func TestAwaitOnLeaderWithoutAnAnswer(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	leader := c.readyLeader().get()
	follower := c.followers(c.readyLeader())[0].get()
	ctx := context.Background()
	unknown := &lockstate.RequestInfo{ID: "r-unknown", Session: 1, Created: 1}
	if _, _, err := follower.AwaitOnLeader(ctx, unknown, time.Second); !errors.Is(err, errRetry) {
		t.Fatalf("leader without an awaiter: err %v, want a retryable one", err)
	}
	for _, tn := range c.live() {
		tn.get().SetAwaiter(tableAwaiter(tn.get()))
	}
	if _, _, err := leader.AwaitOnLeader(ctx, unknown, time.Second); !errors.Is(err, ErrLeaderHere) {
		t.Fatalf("on the leader: err %v, want ErrLeaderHere", err)
	}
	start := time.Now()
	if _, final, err := follower.AwaitOnLeader(ctx, unknown, 20*time.Second); err != nil || final {
		t.Fatalf("unknown request: final %t, err %v; want neither", final, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("unknown request: answered after %v; the leader said at once that it does not hold it", took)
	}

	holder, waiter := createSession(t, leader, time.Minute), createSession(t, leader, time.Minute)
	acquire(t, leader, holder, "job", "r-held", 0, 0)
	pending := acquire(t, follower, waiter, "job", "r-wait", 30*time.Second, 0)
	info, final, err := follower.AwaitOnLeader(ctx, pending, 200*time.Millisecond)
	if err != nil || final || info.Status != "" {
		t.Fatalf("still pending after the wait: %+v final %t err %v; want no answer", info, final, err)
	}
	for what, other := range map[string]lockstate.RequestInfo{
		"another session's request":                     {ID: pending.ID, Session: holder, Created: pending.Created},
		"an earlier request with the same id (created)": {ID: pending.ID, Session: waiter, Created: pending.Created - 1},
	} {
		if _, final, _ := follower.AwaitOnLeader(ctx, &other, time.Second); final {
			t.Fatalf("%s was answered", what)
		}
	}
	for range awaitConns { // every wait on the leader taken: the next one waits only locally
		follower.awaitSlots <- struct{}{}
	}
	if _, _, err := follower.AwaitOnLeader(ctx, pending, time.Second); !errors.Is(err, errAwaitsBusy) {
		t.Fatalf("with every wait on the leader taken: err %v, want errAwaitsBusy", err)
	}
}

// A leader that answers "pending" at once (its lock service is closing)
// is not asked again and again: the follower stops asking and waits in
// its own table.
func TestAwaitOnLeaderDoesNotSpin(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	leader := c.readyLeader().get()
	follower := c.followers(c.readyLeader())[0].get()
	var calls atomic.Int64
	leader.SetAwaiter(func(ctx context.Context, id string, session lockstate.SessionID, created uint64, wait time.Duration) (lockstate.RequestInfo, bool) {
		calls.Add(1)
		return lockstate.RequestInfo{ID: id, Session: session, Created: created, Status: lockstate.Pending}, true
	})
	req := &lockstate.RequestInfo{ID: "r-1", Session: 1, Created: 1}
	if _, final, err := follower.AwaitOnLeader(context.Background(), req, 10*time.Second); final || err != nil {
		t.Fatalf("final %t, err %v; want neither", final, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the leader was asked %d times", n)
	}
}
