//go:build linux

package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestManySessionsSurviveLeaderKill: 2,000 sessions, each kept alive
// every third of its TTL through whichever nodes run, live through a
// SIGKILL of the leader. The new leader gives every session a full TTL
// from taking office (DESIGN.md), so none may expire: no keepalive
// answers session_not_found, and a linearizable list of the sessions a
// TTL and more after the election still holds every one of them.
func TestManySessionsSurviveLeaderKill(t *testing.T) {
	t.Parallel() // mostly waits (see main_test.go)
	const (
		n, workers = 2000, 16
		ttl        = 10 * time.Second
	)
	c := startCluster(t, 3)
	c.waitLeader(c.nodes, 30*time.Second)
	all := addrs(c.nodes...)
	m := &manySessions{c: c, ids: make([]string, n), period: ttl / 3}
	m.live.Store(&all)
	ctx, stop := context.WithCancel(t.Context())
	var created, done sync.WaitGroup
	for w := range workers {
		created.Add(1)
		done.Add(1)
		go func() { defer done.Done(); m.worker(ctx, t, w, workers, ttl, &created) }()
	}
	defer func() { stop(); done.Wait() }()
	created.Wait()
	if t.Failed() {
		return
	}
	time.Sleep(m.period) // every session kept alive at least once

	leader := c.waitLeader(c.nodes, 30*time.Second)
	c.kill(leader)
	survivors := c.others(leader)
	live := addrs(survivors...)
	m.live.Store(&live)
	next := c.waitLeader(survivors, 30*time.Second)
	elected := time.Now()
	t.Logf("killed %s; %s leads", leader.id, next.id)
	// A session the new leader did not re-arm, or that its keepalives
	// did not reach, is expired by now.
	for time.Since(elected) < ttl+m.period {
		if lost := m.lost.Load(); lost > 0 {
			t.Fatalf("%d sessions answered session_not_found after the kill", lost)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var listed []sessionView
	must(t, "list sessions via "+next.id, func(ctx context.Context) (any, error) {
		return nil, c.api.do(ctx, "GET", next.httpAddr, "/v1/sessions?limit=10000", nil, &listed)
	})
	present := map[string]bool{}
	for _, s := range listed {
		present[s.ID] = true
	}
	missing := 0
	for _, id := range m.ids {
		if !present[id] {
			missing++
		}
	}
	if missing > 0 || m.lost.Load() > 0 {
		t.Fatalf("%d of %d sessions gone after the failover (%d keepalives answered session_not_found)", missing, n, m.lost.Load())
	}
	t.Logf("%d sessions live %v after the election; %d keepalives, %d failed and sent again",
		n, time.Since(elected).Round(time.Millisecond), m.sent.Load(), m.failed.Load())
}

// manySessions is the state of TestManySessionsSurviveLeaderKill's
// keepalive workers; ids[i] is written only by session i's worker.
type manySessions struct {
	c      *cluster
	ids    []string
	period time.Duration
	live   atomic.Pointer[[]string] // the running nodes' HTTP addresses
	sent   atomic.Int64
	failed atomic.Int64
	lost   atomic.Int64 // keepalives answered session_not_found
}

// worker opens sessions w, w+workers, ... one by one, keeping those open
// alive every period meanwhile (so the first never waits for the last),
// tells created when they are open, and keeps them alive until ctx ends.
func (m *manySessions) worker(ctx context.Context, t *testing.T, w, workers int, ttl time.Duration, created *sync.WaitGroup) {
	var mine []int
	due := map[int]time.Time{}
	for i := w; i < len(m.ids); i += workers {
		id, err := m.create(ctx, i, ttl)
		if err != nil {
			t.Errorf("create session %d: %v", i, err)
			created.Done()
			return
		}
		m.ids[i] = id
		mine = append(mine, i)
		due[i] = time.Now().Add(m.period)
		m.keepDue(ctx, mine, due)
	}
	created.Done()
	for ctx.Err() == nil {
		m.keepDue(ctx, mine, due)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// create opens session i through the running nodes in turn, again after
// an answer that there is no leader (a loaded machine's election) for up
// to a minute. An attempt whose outcome stayed unknown may leave a
// session nobody keeps alive; it expires, and is none of m.ids.
func (m *manySessions) create(ctx context.Context, i int, ttl time.Duration) (string, error) {
	deadline := time.Now().Add(time.Minute)
	for attempt := 0; ; attempt++ {
		live := *m.live.Load()
		id, err := m.c.api.createSession(ctx, live[(i+attempt)%len(live)], ttl.String())
		if err == nil || errCode(err) != "no_leader" || time.Now().After(deadline) {
			return id, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// keepDue keeps alive each of the sessions mine that is due, through the
// running nodes in turn until one answers, and schedules its next one.
func (m *manySessions) keepDue(ctx context.Context, mine []int, due map[int]time.Time) {
	for _, i := range mine {
		if time.Now().Before(due[i]) {
			continue
		}
		for attempt := 0; ctx.Err() == nil; attempt++ {
			live := *m.live.Load()
			m.sent.Add(1)
			cctx, cancel := context.WithTimeout(ctx, m.period)
			err := m.c.api.sendOnce().keepalive(cctx, live[(i+attempt)%len(live)], m.ids[i])
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			m.failed.Add(1)
			if errCode(err) == "session_not_found" {
				m.lost.Add(1)
				break
			}
			time.Sleep(time.Duration(10*(attempt%10+1)) * time.Millisecond)
		}
		due[i] = time.Now().Add(m.period)
	}
}
