package raftnode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// tableAwaiter is the Awaiter the lock service installs, reduced to what
// the tests need: wait on n's table until request id is no longer pending.
func tableAwaiter(n *Node) Awaiter {
	return func(ctx context.Context, id string, session lockstate.SessionID, wait time.Duration) (lockstate.RequestInfo, bool) {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			changed := n.FSM().Changed()
			info, ok := request(n, id)
			if !ok || info.Session != session {
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
		info, final, err := follower.AwaitOnLeader(context.Background(), "r-wait", waiter, 20*time.Second)
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
	if _, _, err := follower.AwaitOnLeader(ctx, "r-x", 1, time.Second); !errors.Is(err, errRetry) {
		t.Fatalf("leader without an awaiter: err %v, want a retryable one", err)
	}
	for _, tn := range c.live() {
		tn.get().SetAwaiter(tableAwaiter(tn.get()))
	}
	if _, _, err := leader.AwaitOnLeader(ctx, "r-x", 1, time.Second); !errors.Is(err, ErrLeaderHere) {
		t.Fatalf("on the leader: err %v, want ErrLeaderHere", err)
	}
	start := time.Now()
	if _, final, err := follower.AwaitOnLeader(ctx, "r-unknown", 1, 20*time.Second); err != nil || final {
		t.Fatalf("unknown request: final %t, err %v; want neither", final, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("unknown request: answered after %v; the leader said at once that it does not hold it", took)
	}

	holder, waiter := createSession(t, leader, time.Minute), createSession(t, leader, time.Minute)
	acquire(t, leader, holder, "job", "r-held", 0, 0)
	acquire(t, follower, waiter, "job", "r-wait", 30*time.Second, 0)
	info, final, err := follower.AwaitOnLeader(ctx, "r-wait", waiter, 200*time.Millisecond)
	if err != nil || final || info.Status != "" {
		t.Fatalf("still pending after the wait: %+v final %t err %v; want no answer", info, final, err)
	}
	if _, final, _ := follower.AwaitOnLeader(ctx, "r-wait", holder, time.Second); final {
		t.Fatal("another session's request was answered")
	}
	for range awaitConns { // every wait on the leader taken: the next one waits only locally
		follower.awaitSlots <- struct{}{}
	}
	if _, _, err := follower.AwaitOnLeader(ctx, "r-wait", waiter, time.Second); !errors.Is(err, errAwaitsBusy) {
		t.Fatalf("with every wait on the leader taken: err %v, want errAwaitsBusy", err)
	}
}
