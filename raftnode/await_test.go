package raftnode

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

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
	l := c.leader()
	leader, follower := l.get(), c.follower(l).get()
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
		info, final, err := awaitSteady(c, follower, pending, 20*time.Second)
		got <- answer{info, final, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("AwaitOnLeader answered while the request was pending: %+v", a)
	case <-time.After(300 * time.Millisecond):
	}
	release(t, leader, holder, "job", held.Token)
	a := <-got
	if a.err != nil || !a.final || a.info.Status != lockstate.Granted || a.info.Token <= held.Token {
		t.Fatalf("AwaitOnLeader = %+v, want a final grant with a token above %d", a, held.Token)
	}
}

// release releases s's hold on name (fencing token token) through n. A
// release is not safe to repeat once it was done (the repeat finds no
// hold): proposeOnce settles an unknown outcome by whether the hold is
// still there.
func release(t *testing.T, n *Node, s lockstate.SessionID, name string, token uint64) {
	t.Helper()
	proposeOnce(t, n, &lockstate.Release{Session: s, Name: name}, func() bool { return !holds(n, name, token) })
}

// holds reports whether token still fences a hold on name in n's table.
func holds(n *Node, name string, token uint64) bool {
	var valid bool
	n.FSM().Read(func(tab *lockstate.Table) { valid, _ = tab.Check(name, token) })
	return valid
}

// awaitSteady is AwaitOnLeader through f, asked again, as the lock
// service asks again, through a node that follows when an election cut
// the wait short (the term moved meanwhile, or f leads or knows no
// leader now): the old leader stops waiting, and a follower that became
// leader answers ErrLeaderHere. Any other answer without the grant is
// returned as it came. It
// runs off the test's goroutine, so it fails nothing itself.
func awaitSteady(c *testCluster, f *Node, req *lockstate.RequestInfo, wait time.Duration) (lockstate.RequestInfo, bool, error) {
	for attempt := 0; ; attempt++ {
		term := f.Status().Term
		info, final, err := f.AwaitOnLeader(context.Background(), req, wait)
		moved := f.Status().Term != term || f.raft.State() == raft.Leader || errors.Is(err, errRetry)
		if err == nil && final || !moved || attempt == 5 {
			return info, final, err
		}
		deadline := time.Now().Add(10 * time.Second)
		for f = nil; f == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			for _, tn := range c.live() {
				if n := tn.get(); n != nil && n.raft.State() == raft.Follower {
					if _, id := n.raft.LeaderWithID(); id != "" {
						f = n
						break
					}
				}
			}
		}
		if f == nil {
			return info, final, err
		}
	}
}

// What AwaitOnLeader answers when it cannot help: on the leader itself,
// for a request the leader does not hold, and for one still pending when
// the wait ends.
func TestAwaitOnLeaderWithoutAnAnswer(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	leader, follower := l.get(), c.follower(l).get()
	ctx := context.Background()
	unknown := &lockstate.RequestInfo{ID: "r-unknown", Session: 1, Created: 1}
	if _, _, err := follower.AwaitOnLeader(ctx, unknown, time.Second); !errors.Is(err, errRetry) || !strings.Contains(err.Error(), "does not serve waits") {
		t.Fatalf("leader without an awaiter: err %v, want the leader's retryable refusal", err)
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
	l := c.leader()
	leader, follower := l.get(), c.follower(l).get()
	var calls atomic.Int64
	leader.SetAwaiter(func(ctx context.Context, id string, session lockstate.SessionID, created uint64, wait time.Duration) (lockstate.RequestInfo, bool) {
		calls.Add(1)
		return lockstate.RequestInfo{ID: id, Session: session, Created: created, Status: lockstate.Pending}, true
	})
	req := &lockstate.RequestInfo{ID: "r-1", Session: 1, Created: 1}
	if _, final, err := follower.AwaitOnLeader(context.Background(), req, 10*time.Second); final || err != nil {
		t.Fatalf("final %t, err %v; want neither", final, err)
	}
	// Once, unless a loaded machine made an answer take half the wait
	// asked for, which the follower takes for a leader that waited (and
	// asks once more); a follower that spins asks thousands of times.
	if n := calls.Load(); n < 1 || n > 3 {
		t.Fatalf("the leader was asked %d times", n)
	}
}
