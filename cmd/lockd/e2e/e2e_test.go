//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestThreeNodesFormAndAcceptWritesAnywhere: three nodes started with
// --bootstrap-expect 3 form a cluster by themselves, agree on one leader,
// list three voters, and every node accepts writes.
func TestThreeNodesFormAndAcceptWritesAnywhere(t *testing.T) {
	c := startCluster(t, 3)
	start := time.Now()
	leader := c.waitLeader(c.nodes, 30*time.Second)
	t.Logf("leader %s elected %v after start", leader.id, time.Since(start).Round(time.Millisecond))

	eventually(t, 20*time.Second, "every node lists the 3 nodes as alive voters", func() (bool, string) {
		sts, err := c.statuses(c.nodes)
		if err != nil {
			return false, err.Error()
		}
		for i, st := range sts {
			var desc []string
			ok := len(st.Members) == 3
			for _, m := range st.Members {
				desc = append(desc, fmt.Sprintf("%s(voter=%v %s http=%s raft=%s)", m.ID, m.Voter, m.Status, m.HTTPAddr, m.RaftAddr))
				nd := c.byID(m.ID)
				if nd == nil || !m.Voter || m.Status != "alive" || m.HTTPAddr != nd.httpAddr || m.RaftAddr != nd.raftAddr {
					ok = false
				}
			}
			if !ok {
				return false, fmt.Sprintf("%s lists %v", c.nodes[i].id, desc)
			}
		}
		return true, ""
	})
	// Exactly one leader, and every node agrees on it: the one elected
	// first, unless the load of a CI machine starved it of its lease
	// meanwhile (then the next one).
	eventually(t, 20*time.Second, "one leader every node names", func() (bool, string) {
		sts, err := c.statuses(c.nodes)
		if err != nil {
			return false, err.Error()
		}
		var leaders []string
		for i, st := range sts {
			if st.State == "leader" {
				leaders = append(leaders, c.nodes[i].id)
			}
		}
		if len(leaders) != 1 {
			return false, fmt.Sprintf("nodes in state leader: %v", leaders)
		}
		l := c.byID(leaders[0])
		for i, st := range sts {
			if st.Leader.ID != l.id || st.Leader.HTTPAddr != l.httpAddr {
				return false, fmt.Sprintf("%s names leader %+v, %s leads at %s", c.nodes[i].id, st.Leader, l.id, l.httpAddr)
			}
		}
		if l != leader {
			t.Logf("leader now %s, after %s", l.id, leader.id)
		}
		return true, ""
	})

	// Any node accepts writes: a session, a grant and a release through
	// each, each seen by the other nodes.
	var lastToken uint64
	for i, nd := range c.nodes {
		next, third := c.nodes[(i+1)%3], c.nodes[(i+2)%3]
		sid := must(t, "create session via "+nd.id, func(ctx context.Context) (string, error) {
			return c.api.createSession(ctx, nd.httpAddr, "10s")
		})
		name := "form/" + nd.id
		a := must(t, "acquire via "+nd.id, func(ctx context.Context) (*acquireView, error) {
			return c.api.acquire(ctx, nd.httpAddr, sid, "", name, "")
		})
		if a.Token <= lastToken || len(a.Granted) != 1 || a.Granted[0].Name != name {
			t.Fatalf("acquire via %s: %+v (previous token %d)", nd.id, a, lastToken)
		}
		lastToken = a.Token
		l := must(t, "get lock via "+next.id, func(ctx context.Context) (*lockView, error) {
			return c.api.getLock(ctx, next.httpAddr, name, false)
		})
		if len(l.Holders) != 1 || l.Holders[0].Session != sid || l.Holders[0].Token != a.Token {
			t.Fatalf("%s via %s: holders %+v, want session %s token %d", name, next.id, l.Holders, sid, a.Token)
		}
		must(t, "release via "+third.id, func(ctx context.Context) (any, error) {
			return nil, c.api.release(ctx, third.httpAddr, sid, name)
		})
		_, err := call(t, func(ctx context.Context) (*lockView, error) { return c.api.getLock(ctx, nd.httpAddr, name, false) })
		if errCode(err) != "lock_not_found" {
			t.Fatalf("%s after release, via %s: %v, want lock_not_found", name, nd.id, err)
		}
	}
	st := c.waitConverged(c.nodes, 20*time.Second)
	t.Logf("converged at applied_index %d digest %.16s", st.AppliedIndex, st.Digest)
}

// TestHolderAndWaiterSurviveLeaderKill: A holds jobs/x; B, C and D wait
// for it, one through each node (C through the leader of the time). Then
// whoever leads is SIGKILLed: a new leader is elected, A's session lives
// on, the waiter whose node died re-attaches on another node by request
// id, and the lock goes A -> B -> C -> D with increasing tokens. The
// killed node then comes back with the same table.
func TestHolderAndWaiterSurviveLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	first := c.waitLeader(c.nodes, 30*time.Second)
	fs := c.others(first)
	sA, kA := c.keptSession(t, fs[0])
	gA := must(t, "A acquires jobs/x via "+fs[0].id, func(ctx context.Context) (*acquireView, error) {
		return c.api.acquire(ctx, fs[0].httpAddr, sA, "a-1", "jobs/x", "")
	})
	ws := []*waiter{{id: "b-1", nd: fs[1]}, {id: "c-1", nd: first}, {id: "d-1", nd: fs[0]}}
	var queued []string
	for _, w := range ws {
		w.session, w.k = c.keptSession(t, w.nd)
		w.acquired = c.api.goAcquire(t, w.nd.httpAddr, w.session, w.id, "jobs/x", "60s")
		queued = append(queued, w.id)
		c.waitWaiters(fs[0], "jobs/x", queued...)
	}

	leader := c.waitLeader(c.nodes, 30*time.Second) // whoever leads now, which may no longer be first
	killed := time.Now()
	c.kill(leader)
	t.Logf("killed leader %s (%s led first)", leader.id, first.id)
	survivors := c.others(leader)
	for _, w := range ws {
		if w.nd == leader {
			w.reattach(t, c, survivors[0])
		}
	}
	newLeader := c.waitLeader(survivors, 30*time.Second)
	elected := time.Now()
	t.Logf("new leader %s, seen %v after the kill", newLeader.id, elected.Sub(killed).Round(time.Millisecond))

	// A's session lives through the election: its keepalives succeed again.
	eventually(t, 20*time.Second, "A's keepalives succeed again under the new leader", func() (bool, string) {
		st := kA.stats()
		if st.notFound {
			t.Fatalf("session A expired during the failover: %v", st.lastErr)
		}
		return kA.okSince(elected) >= 2, fmt.Sprintf("%+v", st)
	})
	if st := kA.stats(); st.maxConsecutive > 5 {
		t.Errorf("A's keepalives failed %d times in a row across the failover (want a few at most); last: %v",
			st.maxConsecutive, st.lastErr)
	} else {
		t.Logf("A's keepalives: %d ok, %d failed (at most %d in a row)", st.oks, st.fails, st.maxConsecutive)
	}
	l := must(t, "get jobs/x via "+survivors[1].id, func(ctx context.Context) (*lockView, error) {
		return c.api.getLock(ctx, survivors[1].httpAddr, "jobs/x", false)
	})
	if len(l.Holders) != 1 || l.Holders[0].Session != sA || l.Holders[0].Token != gA.Token {
		t.Fatalf("after the failover jobs/x is held by %+v, want session %s token %d", l.Holders, sA, gA.Token)
	}
	if w := waiterIDs(l); !slices.Equal(w, queued) {
		t.Fatalf("after the failover jobs/x waiters are %v, want %v", w, queued)
	}

	// The lock goes down the queue, each release through a node that is up.
	must(t, "A releases jobs/x via "+survivors[0].id, func(ctx context.Context) (any, error) {
		return nil, c.api.release(ctx, survivors[0].httpAddr, sA, "jobs/x")
	})
	last := gA.Token
	for i, w := range ws {
		token := w.granted(t)
		if token <= last {
			t.Fatalf("%s granted with token %d, not larger than the previous holder's %d", w.id, token, last)
		}
		last = token
		if i == len(ws)-1 {
			break // the last one keeps it
		}
		via := survivors[i%len(survivors)]
		must(t, w.id+" releases jobs/x via "+via.id, func(ctx context.Context) (any, error) {
			return nil, c.api.release(ctx, via.httpAddr, w.session, "jobs/x")
		})
	}
	keepers := map[string]*keeper{"a-1": kA}
	for _, w := range ws {
		keepers[w.id] = w.k
	}
	for id, k := range keepers {
		if st := k.stats(); st.notFound {
			t.Errorf("the session of %s expired: %v", id, st.lastErr)
		}
	}

	// The killed node comes back from its data dir with the same state.
	c.start(leader)
	st := c.waitConverged(c.nodes, 30*time.Second)
	l = must(t, "stale read on the restarted node", func(ctx context.Context) (*lockView, error) {
		return c.api.getLock(ctx, leader.httpAddr, "jobs/x", true)
	})
	holder := ws[len(ws)-1]
	if len(l.Holders) != 1 || l.Holders[0].Session != holder.session || l.Holders[0].Token != last {
		t.Fatalf("restarted %s shows jobs/x held by %+v, want session %s token %d", leader.id, l.Holders, holder.session, last)
	}
	t.Logf("restarted %s converged at applied_index %d", leader.id, st.AppliedIndex)
}

// keptSession opens a 6 s session through nd and keeps it alive every
// second, through nd and, while nd fails, the other nodes.
func (c *cluster) keptSession(t *testing.T, nd *node) (string, *keeper) {
	t.Helper()
	id := must(t, "create session via "+nd.id, func(ctx context.Context) (string, error) {
		return c.api.createSession(ctx, nd.httpAddr, "6s")
	})
	return id, c.api.keepAlive(t, id, time.Second, addrs(append([]*node{nd}, c.others(nd)...)...)...)
}

// waiter is a session waiting for a lock through a node.
type waiter struct {
	id         string // the acquire's request id
	nd         *node
	session    string
	k          *keeper
	acquired   <-chan acquireResult
	reattached <-chan reattachResult // once nd was killed
}

// reattach: w's node was killed, so its acquire ends without a grant (the
// lock is held meanwhile); w re-attaches to its request through via.
func (w *waiter) reattach(t *testing.T, c *cluster, via *node) {
	t.Helper()
	r := recvAcquire(t, w.acquired, 15*time.Second, w.id+"'s acquire through the killed "+w.nd.id)
	if r.err == nil {
		t.Fatalf("%s's acquire through the killed %s answered %+v while the lock was held", w.id, w.nd.id, r.a)
	}
	t.Logf("%s's acquire through the killed %s: %v (re-attaching through %s)", w.id, w.nd.id, r.err, via.id)
	w.reattached = c.api.goReattach(t, via.httpAddr, w.id, 90*time.Second)
}

// granted waits for w's grant and returns its token.
func (w *waiter) granted(t *testing.T) uint64 {
	t.Helper()
	if w.reattached == nil {
		r := recvAcquire(t, w.acquired, 30*time.Second, w.id+"'s waiting acquire")
		if r.err != nil {
			t.Fatalf("%s's waiting acquire: %v", w.id, r.err)
		}
		t.Logf("%s granted with token %d after waiting %v", w.id, r.a.Token, r.took.Round(time.Millisecond))
		return r.a.Token
	}
	select {
	case r := <-w.reattached:
		if r.err != nil || r.r.Status != "granted" || r.r.Session != w.session {
			t.Fatalf("%s re-attached: %+v, %v", w.id, r.r, r.err)
		}
		t.Logf("%s granted with token %d, seen by re-attaching", w.id, r.r.Token)
		return r.r.Token
	case <-time.After(30 * time.Second):
		t.Fatalf("%s's re-attached wait did not answer", w.id)
	}
	panic("unreachable")
}

// TestSessionExpiryReleasesAtSameIndexEverywhere: a 3s session holding a
// lock stops sending keepalives; the leader expires it, which releases the
// lock and grants the waiter in the same log entry, visible identically on
// every node.
func TestSessionExpiryReleasesAtSameIndexEverywhere(t *testing.T) {
	t.Parallel() // mostly waits (see main_test.go)
	c := startCluster(t, 3)
	c.waitLeader(c.nodes, 30*time.Second)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]

	// 3 s, not lockstate.MinTTL's 1 s: a loaded CI machine can starve
	// the keepalives for most of a second, which can lapse a 1 s session.
	s1 := must(t, "create 3s session", func(ctx context.Context) (string, error) {
		return c.api.createSession(ctx, n1.httpAddr, "3s")
	})
	k1 := c.api.keepAlive(t, s1, 750*time.Millisecond, addrs(c.nodes...)...)
	g1 := must(t, "acquire exp/x", func(ctx context.Context) (*acquireView, error) {
		return c.api.acquire(ctx, n1.httpAddr, s1, "h-1", "exp/x", "")
	})
	held := time.Now()
	s2 := must(t, "create waiter session", func(ctx context.Context) (string, error) {
		return c.api.createSession(ctx, n2.httpAddr, "10s")
	})
	k2 := c.api.keepAlive(t, s2, time.Second, n2.httpAddr, n3.httpAddr, n1.httpAddr)
	wCh := c.api.goAcquire(t, n2.httpAddr, s2, "w-1", "exp/x", "60s")
	c.waitWaiters(n3, "exp/x", "w-1")

	// Keepalives hold the 3s session for two TTLs.
	eventually(t, 20*time.Second, "the 3s session kept alive for 6s", func() (bool, string) {
		return time.Since(held) > 6*time.Second && k1.stats().oks >= 6, fmt.Sprintf("%+v", k1.stats())
	})
	l := must(t, "get exp/x", func(ctx context.Context) (*lockView, error) {
		return c.api.getLock(ctx, n3.httpAddr, "exp/x", false)
	})
	if len(l.Holders) != 1 || l.Holders[0].Session != s1 || l.Holders[0].Token != g1.Token {
		t.Fatalf("exp/x held by %+v, want session %s token %d (kept alive: %+v)", l.Holders, s1, g1.Token, k1.stats())
	}

	k1.stop()
	stopped := time.Now()
	rw, wid := c.awaitExpiryGrant(t, wCh, n2, s2, "exp/x")
	if rw.a.Token <= g1.Token {
		t.Fatalf("waiter granted with token %d, not larger than the expired holder's %d", rw.a.Token, g1.Token)
	}
	t.Logf("waiter granted %v after the last keepalive (ttl 3s), token %d",
		time.Since(stopped).Round(time.Millisecond), rw.a.Token)
	for _, nd := range c.nodes {
		_, err := call(t, func(ctx context.Context) (*sessionView, error) { return c.api.getSession(ctx, nd.httpAddr, s1, false) })
		if errCode(err) != "session_not_found" {
			t.Errorf("GET expired session %s via %s: %v, want session_not_found", s1, nd.id, err)
		}
	}

	// Every node's own table: the same grant at the same index, the same
	// holder and version.
	var version uint64
	for _, nd := range c.nodes {
		var r *requestView
		var l *lockView
		eventually(t, 10*time.Second, "the grant applied on "+nd.id, func() (bool, string) {
			var err error
			if r, err = call(t, func(ctx context.Context) (*requestView, error) {
				return c.api.getRequest(ctx, nd.httpAddr, wid, "", true)
			}); err != nil {
				return false, err.Error()
			}
			if l, err = call(t, func(ctx context.Context) (*lockView, error) {
				return c.api.getLock(ctx, nd.httpAddr, "exp/x", true)
			}); err != nil {
				return false, err.Error()
			}
			return r.Status == "granted" && len(l.Holders) == 1 && l.Holders[0].Session == s2,
				fmt.Sprintf("request %+v lock %+v", r, l)
		})
		if r.Token != rw.a.Token || r.Ended != rw.a.Token || r.Session != s2 {
			t.Errorf("%s: request %s %+v, want granted at index %d with token %d", nd.id, wid, r, rw.a.Token, rw.a.Token)
		}
		if h := l.Holders[0]; h.Token != rw.a.Token || len(l.Waiters) != 0 {
			t.Errorf("%s: exp/x %+v, want only session %s with token %d", nd.id, l, s2, rw.a.Token)
		}
		if version == 0 {
			version = l.Version
		} else if l.Version != version {
			t.Errorf("%s: exp/x version %d, %s has %d", nd.id, l.Version, n1.id, version)
		}
	}
	st := c.waitConverged(c.nodes, 20*time.Second)
	t.Logf("expiry and grant at index %d, lock version %d; converged at applied_index %d", rw.a.Token, version,
		st.AppliedIndex)
	if st := k2.stats(); st.notFound {
		t.Errorf("the waiter's session expired: %v", st.lastErr)
	}
}

// awaitExpiryGrant waits for the grant of the waiter's request w-1 (ch,
// through nd, of session) that the holder's expiry gives, and returns it
// with the id of the request granted. Expiry needs one leader to go a
// TTL without a keepalive, and every new leader re-arms every session
// with a full TTL: while leaders change (LOCKD_TEST_TIMING) that can take
// many TTLs, so whenever the wait (the longest a server allows) runs out
// first, the waiter queues again under the next request id.
func (c *cluster) awaitExpiryGrant(t *testing.T, ch <-chan acquireResult, nd *node, session, name string) (acquireResult, string) {
	t.Helper()
	const wait, limit = 60 * time.Second, 4 * time.Minute
	start := time.Now()
	for i := 1; ; i++ {
		id := fmt.Sprintf("w-%d", i)
		r := recvAcquire(t, ch, wait+callTimeout, "the waiter's acquire "+id)
		switch {
		case r.err == nil:
			return r, id
		case errCode(r.err) != "timeout" || time.Since(start) > limit:
			t.Fatalf("waiter %s after %v: %v", id, time.Since(start).Round(time.Millisecond), r.err)
		}
		t.Logf("waiter %s: %v; the holder's session not expired yet: queueing again", id, r.err)
		ch = c.api.goAcquire(t, nd.httpAddr, session, fmt.Sprintf("w-%d", i+1), name, wait.String())
	}
}

// TestRestartedNodeCatchesUp: a follower is SIGKILLed, the others take
// hundreds of writes, and the follower restarted from its data dir catches
// up to the same applied index and digest.
//
// TestRestartedNodeCatchesUp: a follower killed while the others write
// catches up from the leader's log when restarted.
func TestRestartedNodeCatchesUp(t *testing.T) {
	testCatchUp(t, 8, 40, 0)
}

// TestRestartedNodeCatchesUpFromSnapshot: with a small snapshot threshold
// and few trailing logs, the leader snapshots and compacts its log past
// the killed follower while it is down, so the restarted follower has to
// install the leader's snapshot.
func TestRestartedNodeCatchesUpFromSnapshot(t *testing.T) {
	testCatchUp(t, 8, 60, 100, "--snapshot-threshold", "200", "--snapshot-interval", "500ms", "--trailing-logs", "100")
}

// testCatchUp kills a follower, writes workers×pairs pairs, restarts it and
// checks it converged. trailing > 0 means the cluster runs with that many
// trailing logs and the follower must catch up from a snapshot.
func testCatchUp(t *testing.T, workers, pairs int, trailing uint64, flags ...string) {
	needSnapshot := trailing > 0
	c := startCluster(t, 3, flags...)
	leader := c.waitLeader(c.nodes, 30*time.Second)
	victim := c.others(leader)[0]
	other := c.others(leader, victim)[0]

	sP := must(t, "create session", func(ctx context.Context) (string, error) {
		return c.api.createSession(ctx, victim.httpAddr, "10s")
	})
	kP := c.api.keepAlive(t, sP, time.Second, other.httpAddr, leader.httpAddr)
	gP := must(t, "acquire cu/before", func(ctx context.Context) (*acquireView, error) {
		return c.api.acquire(ctx, victim.httpAddr, sP, "", "cu/before", "")
	})
	before := c.waitConverged(c.nodes, 20*time.Second)
	c.kill(victim)
	t.Logf("killed follower %s at applied_index %d", victim.id, before.AppliedIndex)

	start := time.Now()
	held := writeLoad(t, c, []*node{leader, other}, workers, pairs)
	after := c.waitConverged([]*node{leader, other}, 30*time.Second)
	t.Logf("%d acquire+release pairs by %d clients in %v; applied_index %d -> %d (%d entries the follower missed)",
		workers*pairs, workers, time.Since(start).Round(time.Millisecond), before.AppliedIndex, after.AppliedIndex,
		after.AppliedIndex-before.AppliedIndex)

	if needSnapshot {
		// Whichever of the two leads when the follower returns keeps only
		// trailing entries behind its snapshot. The follower's log may
		// end a little past the commit index it was seen at (a no-op of
		// an election just before the kill): a margin covers it.
		const margin = 20
		past := before.CommitIndex + trailing + margin
		if after.CommitIndex <= past {
			t.Fatalf("only %d entries since the kill: the leader's log would still reach back to the follower",
				after.CommitIndex-before.CommitIndex)
		}
		for _, nd := range []*node{leader, other} {
			eventually(t, time.Minute, "a snapshot on "+nd.id+" past the follower's log + trailing logs", func() (bool, string) {
				idx := newestSnapshot(nd.dataDir)
				return idx > past, fmt.Sprintf("newest snapshot at index %d, want past %d", idx, past)
			})
		}
	}

	c.start(victim)
	restarted := time.Now()
	st := c.waitConverged(c.nodes, 60*time.Second)
	t.Logf("restarted %s caught up to applied_index %d in %v", victim.id, st.AppliedIndex,
		time.Since(restarted).Round(time.Millisecond))
	if needSnapshot {
		if idx := newestSnapshot(victim.dataDir); idx <= before.CommitIndex {
			t.Errorf("%s caught up without installing a snapshot (newest local snapshot at %d)", victim.id, idx)
		} else {
			t.Logf("%s installed the leader's snapshot at index %d", victim.id, idx)
		}
	}

	// The restarted node's own table has what happened while it was down.
	check := func(name, session string, token uint64) {
		l := must(t, "stale read of "+name+" on "+victim.id, func(ctx context.Context) (*lockView, error) {
			return c.api.getLock(ctx, victim.httpAddr, name, true)
		})
		if len(l.Holders) != 1 || l.Holders[0].Session != session || l.Holders[0].Token != token {
			t.Errorf("%s on restarted %s: holders %+v, want session %s token %d", name, victim.id, l.Holders, session, token)
		}
	}
	check("cu/before", sP, gP.Token)
	for name, h := range held {
		check(name, h.session, h.token)
	}
	if s := kP.stats(); s.notFound {
		t.Errorf("session expired: %v", s.lastErr)
	}
}

type hold struct {
	session string
	token   uint64
}

// writeLoad runs workers clients, each with its own session, doing pairs
// acquire+release rounds through nodes, and finally holding
// cu/held/<worker>. It returns those held locks; their sessions are kept
// alive until the test ends.
func writeLoad(t *testing.T, c *cluster, nodes []*node, workers, pairs int) map[string]hold {
	t.Helper()
	var mu sync.Mutex
	held := map[string]hold{}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			addr := nodes[w%len(nodes)].httpAddr
			sid, err := c.api.createSession(ctx, addr, "30s")
			if err != nil {
				errs <- fmt.Errorf("worker %d: create session: %w", w, err)
				return
			}
			for i := range pairs {
				name := fmt.Sprintf("cu/w%d/%d", w, i%16)
				if _, err := c.api.acquire(ctx, addr, sid, "", name, ""); err != nil {
					errs <- fmt.Errorf("worker %d: acquire %s: %w", w, name, err)
					return
				}
				if err := c.api.release(ctx, addr, sid, name); err != nil {
					errs <- fmt.Errorf("worker %d: release %s: %w", w, name, err)
					return
				}
			}
			name := fmt.Sprintf("cu/held/%d", w)
			a, err := c.api.acquire(ctx, addr, sid, "", name, "")
			if err != nil {
				errs <- fmt.Errorf("worker %d: acquire %s: %w", w, name, err)
				return
			}
			mu.Lock()
			held[name] = hold{sid, a.Token}
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, h := range held {
		c.api.keepAlive(t, h.session, 5*time.Second, addrs(nodes...)...)
	}
	return held
}

// newestSnapshot returns the index of the newest snapshot in a node's
// file snapshot store (<data-dir>/snapshots/<term>-<index>-<ms>), 0 if none.
func newestSnapshot(dataDir string) uint64 {
	ents, _ := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	var best uint64
	for _, e := range ents {
		parts := strings.Split(e.Name(), "-")
		if !e.IsDir() || len(parts) != 3 || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dataDir, "snapshots", e.Name(), "meta.json")); err != nil {
			continue
		}
		if idx, err := strconv.ParseUint(parts[1], 10, 64); err == nil {
			best = max(best, idx)
		}
	}
	return best
}

// TestFiveNodesQuorum: five nodes keep serving with a follower and then the
// leader down; with a third down they stop granting (503 no_leader or 409
// timeout, answered in bounded time, nothing committed); when the three come
// back every acknowledged grant and release is still there.
func TestFiveNodesQuorum(t *testing.T) {
	t.Parallel() // mostly waits (see main_test.go)
	c := startCluster(t, 5)
	leader := c.waitLeader(c.nodes, 40*time.Second)
	all := c.nodes

	sP := must(t, "create session P", func(ctx context.Context) (string, error) {
		return c.api.createSession(ctx, c.others(leader)[0].httpAddr, "10s")
	})
	kP := c.api.keepAlive(t, sP, time.Second, addrs(all...)...)
	sQ := must(t, "create session Q", func(ctx context.Context) (string, error) {
		return c.api.createSession(ctx, leader.httpAddr, "10s")
	})
	kQ := c.api.keepAlive(t, sQ, time.Second, addrs(all...)...)

	held := map[string]uint64{} // acknowledged grants to P
	var released []string       // acknowledged releases by P
	writes := func(phase string, via []*node) {
		t.Helper()
		for _, nd := range via {
			name := phase + "/held-" + nd.id
			a := must(t, "acquire "+name+" via "+nd.id, func(ctx context.Context) (*acquireView, error) {
				return c.api.acquire(ctx, nd.httpAddr, sP, "", name, "")
			})
			held[name] = a.Token
			rel := phase + "/rel-" + nd.id
			must(t, "acquire "+rel+" via "+nd.id, func(ctx context.Context) (*acquireView, error) {
				return c.api.acquire(ctx, nd.httpAddr, sP, "", rel, "")
			})
			must(t, "release "+rel+" via "+nd.id, func(ctx context.Context) (any, error) {
				return nil, c.api.release(ctx, nd.httpAddr, sP, rel)
			})
			released = append(released, rel)
		}
	}
	writes("q/healthy", all)
	must(t, "Q acquires q/outage-held", func(ctx context.Context) (*acquireView, error) {
		return c.api.acquire(ctx, leader.httpAddr, sQ, "", "q/outage-held", "")
	})

	// One follower down, then the leader too (whoever leads by then): 3
	// of 5 serve.
	down1 := c.others(c.waitLeader(all, 30*time.Second))[0]
	c.kill(down1)
	writes("q/down1", c.others(down1))
	down2 := c.waitLeader(c.others(down1), 30*time.Second)
	c.kill(down2)
	killed := time.Now()
	alive := c.others(down1, down2)
	newLeader := c.waitLeader(alive, 30*time.Second)
	t.Logf("killed follower %s and leader %s; %s leads %v later", down1.id, down2.id, newLeader.id,
		time.Since(killed).Round(time.Millisecond))
	writes("q/down2", alive)

	// A third down: no majority. Kill a follower of whoever leads now, so
	// that this leader has to notice it lost its quorum.
	third := c.others(down1, down2, c.waitLeader(alive, 30*time.Second))[0]
	c.kill(third)
	outage := time.Now()
	survivors := c.others(down1, down2, third)
	t.Logf("killed %s too: %v left", third.id, ids(survivors))
	once := c.api.sendOnce() // each attempt's own answer, neither resent nor settled

	attempts := func(round string) {
		t.Helper()
		type result struct {
			what string
			err  error
			took time.Duration
		}
		var mu sync.Mutex
		var results []result
		var wg sync.WaitGroup
		try := func(what string, f func(ctx context.Context) error) {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
				defer cancel()
				start := time.Now()
				err := f(ctx)
				mu.Lock()
				results = append(results, result{what, err, time.Since(start)})
				mu.Unlock()
			})
		}
		for _, nd := range survivors {
			try("create session via "+nd.id, func(ctx context.Context) error {
				_, err := once.createSession(ctx, nd.httpAddr, "10s")
				return err
			})
			try("acquire q/never (wait 0) via "+nd.id, func(ctx context.Context) error {
				_, err := once.acquire(ctx, nd.httpAddr, sQ, "", "q/never", "")
				return err
			})
			try("acquire q/never (wait 2s) via "+nd.id, func(ctx context.Context) error {
				_, err := once.acquire(ctx, nd.httpAddr, sQ, "", "q/never", "2s")
				return err
			})
			try("release q/outage-held via "+nd.id, func(ctx context.Context) error {
				return once.release(ctx, nd.httpAddr, sQ, "q/outage-held")
			})
			try("linearizable read via "+nd.id, func(ctx context.Context) error {
				_, err := once.getLock(ctx, nd.httpAddr, "q/never", false)
				return err
			})
		}
		wg.Wait()
		for _, r := range results {
			code := errCode(r.err)
			switch {
			case r.err == nil:
				t.Errorf("%s, %s: succeeded without a majority (after %v)", round, r.what, r.took)
			case code == "no_leader" || (code == "timeout" && strings.HasPrefix(r.what, "acquire")):
				t.Logf("%s, %s: after %v: %v", round, r.what, r.took.Round(time.Millisecond), r.err)
			default:
				t.Errorf("%s, %s: %v after %v, want 503 no_leader (or 409 timeout for an acquire)", round, r.what,
					r.err, r.took)
			}
		}
	}
	attempts("right after the third kill")
	eventually(t, 15*time.Second, "no survivor claims leadership", func() (bool, string) {
		sts, err := c.statuses(survivors)
		if err != nil {
			return false, err.Error()
		}
		var desc []string
		ok := true
		for i, st := range sts {
			desc = append(desc, survivors[i].id+":"+st.State+"/leader="+st.Leader.ID)
			ok = ok && st.State != "leader" && st.Leader.ID == ""
		}
		return ok, strings.Join(desc, " ")
	})
	before, err := c.statuses(survivors)
	if err != nil {
		t.Fatal(err)
	}
	attempts("without a leader")
	afterSts, err := c.statuses(survivors)
	if err != nil {
		t.Fatal(err)
	}
	for i, nd := range survivors {
		if before[i].CommitIndex != afterSts[i].CommitIndex || before[i].AppliedIndex != afterSts[i].AppliedIndex {
			t.Errorf("%s committed without a majority: commit %d -> %d, applied %d -> %d", nd.id,
				before[i].CommitIndex, afterSts[i].CommitIndex, before[i].AppliedIndex, afterSts[i].AppliedIndex)
		}
		_, err := call(t, func(ctx context.Context) (*lockView, error) { return c.api.getLock(ctx, nd.httpAddr, "q/never", true) })
		if errCode(err) != "lock_not_found" {
			t.Errorf("stale q/never on %s during the outage: %v, want lock_not_found", nd.id, err)
		}
		for name, token := range held { // stale reads still answer from the local table
			l, err := call(t, func(ctx context.Context) (*lockView, error) { return c.api.getLock(ctx, nd.httpAddr, name, true) })
			if err != nil || len(l.Holders) != 1 || l.Holders[0].Token != token {
				t.Errorf("stale %s on %s during the outage: %+v, %v; want token %d", name, nd.id, l, err, token)
			}
		}
	}
	t.Logf("outage of %v; survivors stayed at commit_index %d/%d", time.Since(outage).Round(time.Millisecond),
		afterSts[0].CommitIndex, afterSts[1].CommitIndex)

	// The three come back: the cluster recovers with everything acknowledged.
	restart := time.Now()
	for _, nd := range []*node{down1, down2, third} {
		c.start(nd)
	}
	recovered := c.waitLeader(all, 40*time.Second)
	t.Logf("%s leads %v after restarting the three", recovered.id, time.Since(restart).Round(time.Millisecond))
	for i, nd := range all {
		via := all[(i+1)%len(all)]
		for name, token := range held {
			if !strings.HasSuffix(name, "-"+nd.id) {
				continue // one read per acknowledged grant, spread over the nodes
			}
			l := must(t, "get "+name+" via "+via.id, func(ctx context.Context) (*lockView, error) {
				return c.api.getLock(ctx, via.httpAddr, name, false)
			})
			if len(l.Holders) != 1 || l.Holders[0].Session != sP || l.Holders[0].Token != token {
				t.Errorf("acknowledged grant %s: holders %+v, want session %s token %d", name, l.Holders, sP, token)
			}
		}
	}
	for _, name := range released {
		_, err := call(t, func(ctx context.Context) (*lockView, error) {
			return c.api.getLock(ctx, recovered.httpAddr, name, false)
		})
		if errCode(err) != "lock_not_found" {
			t.Errorf("acknowledged release %s: %v, want lock_not_found", name, err)
		}
	}
	// The outcome of writes answered 503 is unknown: log what became of them.
	if l, err := call(t, func(ctx context.Context) (*lockView, error) {
		return c.api.getLock(ctx, recovered.httpAddr, "q/never", false)
	}); err == nil {
		t.Logf("q/never after recovery (an unacknowledged acquire committed later): %+v", l)
	}
	writes("q/recovered", all)
	st := c.waitConverged(all, 30*time.Second)
	t.Logf("5 nodes converged at applied_index %d", st.AppliedIndex)
	for name, k := range map[string]*keeper{"P": kP, "Q": kQ} {
		s := k.stats()
		if s.notFound {
			t.Errorf("session %s expired: %v", name, s.lastErr)
		}
		t.Logf("session %s keepalives: %d ok, %d failed, at most %d in a row", name, s.oks, s.fails, s.maxConsecutive)
		if os.Getenv("LOCKD_E2E_LOGS") != "" {
			t.Logf("session %s keepalives:\n%s", name, k.log())
		}
	}
}

// ---- test-local helpers ---------------------------------------------------

func waiterIDs(l *lockView) []string {
	var out []string
	for _, w := range l.Waiters {
		out = append(out, w.RequestID)
	}
	return out
}

// waitWaiters waits until name's waiters (read through nd) are exactly want.
func (c *cluster) waitWaiters(nd *node, name string, want ...string) {
	c.t.Helper()
	eventually(c.t, 15*time.Second, fmt.Sprintf("%s waiters %v", name, want), func() (bool, string) {
		l, err := call(c.t, func(ctx context.Context) (*lockView, error) { return c.api.getLock(ctx, nd.httpAddr, name, false) })
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(waiterIDs(l), want), fmt.Sprintf("%+v", l)
	})
}

type reattachResult struct {
	r   *requestView
	err error
}

// goReattach long-polls GET /v1/requests/{id}?wait= on addr until the
// request is no longer pending or total runs out, retrying errors.
func (c *client) goReattach(t *testing.T, addr, id string, total time.Duration) <-chan reattachResult {
	ch := make(chan reattachResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), total)
		defer cancel()
		var last reattachResult
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second+callTimeout)
			r, err := c.getRequest(cctx, addr, id, "30s", false)
			ccancel()
			last = reattachResult{r, err}
			if err == nil && r.Status != "pending" {
				break
			}
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
		ch <- last
	}()
	return ch
}

// TestSessionSurvivesPausedLeader: the leader is frozen (SIGSTOP, a GC
// pause or a hung VM), not killed. A session kept alive only through a
// follower must live on: the follower's forwarded keepalives to the frozen
// leader give up after about an election and find the new leader, which
// re-armed the session with a full TTL. (Before forwarded keepalives had a
// per-attempt bound, they hung on the frozen leader past that TTL.) Then
// the old leader wakes, believing it leads: the session lives on.
func TestSessionSurvivesPausedLeader(t *testing.T) {
	t.Parallel() // mostly waits (see main_test.go)
	c := startCluster(t, 3)
	c.waitLeader(c.nodes, 30*time.Second)
	sid := must(t, "create session", func(ctx context.Context) (string, error) {
		return c.api.createSession(ctx, c.nodes[0].httpAddr, "5s")
	})
	leader := c.waitLeader(c.nodes, 30*time.Second) // whoever leads now: frozen at once
	f := c.others(leader)[0]
	k := c.api.keepAlive(t, sid, time.Second, f.httpAddr)

	leader.mu.Lock()
	proc := leader.cmd.Process
	leader.mu.Unlock()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Signal(syscall.SIGCONT) })
	t.Logf("froze leader %s", leader.id)
	newLeader := c.waitLeader(c.others(leader), 30*time.Second)
	t.Logf("new leader %s", newLeader.id)

	// Three TTLs with the old leader frozen: the session must stay alive.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if st := k.stats(); st.notFound {
			t.Fatalf("session expired while its keepalives went to a follower: %v\n%s", st.lastErr, k.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := k.stats(); st.oks < 5 {
		t.Fatalf("only %d keepalives succeeded in 15 s (%d failed, last: %v)", st.oks, st.fails, st.lastErr)
	}

	// The old leader wakes believing it leads, every session's deadline
	// long past on its clock: whatever expiry it proposes cannot commit,
	// and it must not end the session. It rejoins as a follower.
	_ = proc.Signal(syscall.SIGCONT)
	c.waitLeader(c.nodes, 30*time.Second)
	oks := k.stats().oks
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st := k.stats(); st.notFound {
			t.Fatalf("session expired after the old leader woke: %v\n%s", st.lastErr, k.log())
		}
	}
	if st := k.stats(); st.oks < oks+3 {
		t.Fatalf("only %d keepalives succeeded in the 10 s after the old leader woke (%d failed, last: %v)", st.oks-oks, st.fails, st.lastErr)
	}
}
