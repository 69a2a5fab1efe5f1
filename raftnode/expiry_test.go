package raftnode

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// TestMassExpiry: sessions that each hold a lock two others wait for all
// miss their deadline at once. Every one expires on every node, each lock
// goes to its first waiter (the second still waits), and the log shows
// how: with every voter on this build, a few ExpireSessions entries of at
// most expiryBatch sessions each; with a voter on a build before
// FormatExpireBatch, one ExpireSession entry per session, as that build
// can apply.
func TestMassExpiry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format int
	}{
		{"batched", int(fsm.NewestFormat)},
		{"older voter", int(fsm.FormatHoldValues)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testMassExpiry(t, tc.format)
		})
	}
}

func testMassExpiry(t *testing.T, format int) {
	const (
		dying    = 300 // more than two entries of expiryBatch
		dyingTTL = time.Minute
	)
	// One clock for the cluster, moved past the dying sessions' TTL
	// below, rather than a wait for it.
	var ahead atomic.Int64
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	})
	for _, tn := range c.live() {
		tn.get().SetLogFormat(func() int { return format })
	}
	n := c.leader().get()
	first, second := createSession(t, n, time.Hour), createSession(t, n, time.Hour)
	sessions := make([]lockstate.SessionID, dying)
	for i := range sessions {
		sessions[i] = createSession(t, n, dyingTTL)
		name := fmt.Sprintf("mass/%d", i)
		if r := acquire(t, n, sessions[i], name, fmt.Sprintf("held-%d", i), 0, 0); r.Status != lockstate.Granted {
			t.Fatalf("%s: %s", name, r.Status)
		}
		for _, w := range []struct {
			s  lockstate.SessionID
			id string
		}{{first, "first-%d"}, {second, "second-%d"}} {
			if r := acquire(t, n, w.s, name, fmt.Sprintf(w.id, i), time.Hour, 0); r.Status != lockstate.Pending {
				t.Fatalf("%s waiter: %s", name, r.Status)
			}
		}
	}
	start := c.leader().get().raft.LastIndex()
	seen := watchExpiries(t, c)

	// Past every dying deadline. A new leader gives every session a full
	// TTL from its own start (it cannot know the last keepalive): after
	// an election the clock is moved again.
	var movedFor uint64
	waitFor(t, 2*time.Minute, "every dying session to expire everywhere", func() bool {
		if l := c.readyLeader(); l != nil {
			if lead := l.get().lead.Load(); lead != nil && lead.term != movedFor {
				movedFor = lead.term
				ahead.Add(int64(dyingTTL + time.Second))
			}
		}
		for _, tn := range c.live() {
			for _, s := range sessions {
				if hasSession(tn.get(), s) {
					return false
				}
			}
		}
		return true
	})
	c.converged()
	for id, counts := range seen() {
		for _, s := range sessions {
			if counts[s] != 1 {
				t.Errorf("%s: session %d expired %d times in its events, want once", id, s, counts[s])
			}
		}
	}
	for _, tn := range c.live() {
		tn.get().FSM().Read(func(tab *lockstate.Table) {
			for i := range dying {
				li, _ := tab.Lock(fmt.Sprintf("mass/%d", i))
				if len(li.Holders) != 1 || li.Holders[0].Session != first || len(li.Waiters) != 1 || li.Waiters[0].Session != second {
					t.Errorf("%s: mass/%d: holders %+v, waiters %+v; want the first waiter holding, the second waiting",
						tn.id, i, li.Holders, li.Waiters)
					return
				}
			}
		})
	}

	singles, batches, most := expiryEntries(t, c.leader().get(), start)
	t.Logf("format %d: %d sessions expired by %d single entries and %d batches (the largest %d)", format, dying, singles, batches, most)
	if format >= int(fsm.FormatExpireBatch) {
		// Each batch at most expiryBatch; a few more entries after an
		// election cut one short.
		if singles != 0 || batches < dying/expiryBatch || batches > dying/expiryBatch+4 || most > expiryBatch {
			t.Errorf("batched expiry: %d single entries, %d batches of at most %d", singles, batches, most)
		}
	} else if batches != 0 || singles < dying {
		t.Errorf("an older voter: %d batches, %d single expiries of %d sessions", batches, singles, dying)
	}
}

// TestExpirerRestsAfterABatch: a committed batch holds the next
// proposal back until its rest ends (as long as the batch took, at most
// maxExpiryRest); a single expiry, what a voter before
// FormatExpireBatch needs, proposes on at once.
func TestExpirerRestsAfterABatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ids      []lockstate.SessionID
		took     time.Duration
		wantRest bool
	}{
		{"batch", []lockstate.SessionID{1, 2, 3}, 5 * time.Millisecond, true},
		{"slow batch", []lockstate.SessionID{1, 2}, time.Hour, true}, // the rest is capped: the timer below fires
		{"single", []lockstate.SessionID{1}, 5 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLeadership()
			defer l.end()
			e := newExpirer(&Node{}, l)
			defer e.pause.Stop()
			e.inFlight = 1
			e.finished(expiryOutcome{ids: tc.ids, took: tc.took})
			if e.inFlight != 0 || e.paused != tc.wantRest {
				t.Fatalf("after a commit of %d sessions in %v: in flight %d, resting %v; want 0, %v",
					len(tc.ids), tc.took, e.inFlight, e.paused, tc.wantRest)
			}
			if !tc.wantRest {
				return
			}
			select {
			case <-e.pause.C:
				e.resumed()
			case <-time.After(time.Minute): // far past maxExpiryRest
				t.Fatal("the rest did not end")
			}
			if e.paused {
				t.Fatal("still resting after the rest ended")
			}
		})
	}
}

// watchExpiries subscribes to every node's applied events; seen ends the
// subscriptions and returns, per node, how many times each session's
// expiry was an event. No session may end unobserved, nor twice.
func watchExpiries(t *testing.T, c *testCluster) (seen func() map[string]map[lockstate.SessionID]int) {
	var wg sync.WaitGroup
	counts := map[string]map[lockstate.SessionID]int{}
	var subs []*fsm.Subscription
	for _, tn := range c.live() {
		sub := tn.get().FSM().Subscribe(1 << 16) // every batch of the test, so none is dropped
		subs = append(subs, sub)
		mine := map[lockstate.SessionID]int{}
		counts[tn.id] = mine
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range sub.C() {
				for _, ev := range b.Events {
					if ev.Kind == lockstate.EvSessionExpired {
						mine[ev.Session]++
					}
				}
			}
		}()
	}
	return func() map[string]map[lockstate.SessionID]int {
		for _, sub := range subs {
			if err := sub.Err(); err != nil {
				t.Errorf("a subscription ended early: %v", err)
			}
			sub.Close()
		}
		wg.Wait()
		return counts
	}
}

// expiryEntries counts the expiry entries in n's log after index from:
// single ExpireSessions, batches, and the most sessions a batch named.
func expiryEntries(t *testing.T, n *Node, from uint64) (singles, batches, most int) {
	t.Helper()
	last, err := n.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := from + 1; i <= last; i++ {
		var e raft.Log
		if err := n.logs.GetLog(i, &e); err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		if e.Type != raft.LogCommand {
			continue
		}
		_, cmd, err := fsm.Decode(e.Data)
		if err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		switch c := cmd.(type) {
		case *lockstate.ExpireSession:
			singles++
		case *lockstate.ExpireSessions:
			batches++
			most = max(most, len(c.Sessions))
		}
	}
	return singles, batches, most
}
