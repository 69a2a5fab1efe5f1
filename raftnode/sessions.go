package raftnode

import (
	"container/heap"
	"fmt"
	"sync"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// Session deadlines live only in the leader's memory (Consul's session
// timers): a keepalive moves a deadline without a log write, and only an
// expiry goes through the log. Deadlines are read from the node's clock
// (Config.Now). Its default, time.Now, carries the monotonic reading, which
// Add, Sub and After use, so a jump of the wall clock neither expires nor
// prolongs sessions; a Config.Now that is moved does move them.

// sessionTimer is one session's keepalive deadline.
type sessionTimer struct {
	id       lockstate.SessionID
	ttl      time.Duration
	deadline time.Time
	// pos is the timer's place in the heap, or -1 once its expiry has
	// been decided: from then on keepalives are refused, so nobody is told
	// a session lives that is about to be expired.
	pos int
}

// sessionTimers is a heap of deadlines, earliest first, shared between
// runSessionExpiry and keepalive callers.
type sessionTimers struct {
	mu   sync.Mutex
	byID map[lockstate.SessionID]*sessionTimer
	heap timerHeap
	// wake tells runSessionExpiry that a deadline earlier than the one it
	// sleeps towards may have been added.
	wake chan struct{}
}

func newSessionTimers() *sessionTimers {
	return &sessionTimers{byID: make(map[lockstate.SessionID]*sessionTimer), wake: make(chan struct{}, 1)}
}

func (s *sessionTimers) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// arm sets a session's deadline, adding the session if needed. A session
// whose expiry is already being proposed is left alone.
func (s *sessionTimers) arm(id lockstate.SessionID, ttl time.Duration, deadline time.Time) {
	s.mu.Lock()
	t := s.byID[id]
	switch {
	case t == nil:
		t = &sessionTimer{id: id, ttl: ttl, deadline: deadline}
		s.byID[id] = t
		heap.Push(&s.heap, t)
	case t.pos >= 0:
		t.ttl, t.deadline = ttl, deadline
		heap.Fix(&s.heap, t.pos)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// renew moves a known session's deadline to now + TTL. known is false for
// a session it does not track; expiring is true when its expiry has been
// decided.
func (s *sessionTimers) renew(id lockstate.SessionID, now time.Time) (ttl time.Duration, known, expiring bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.byID[id]
	if t == nil {
		return 0, false, false
	}
	if t.pos < 0 {
		return t.ttl, true, true
	}
	// Only ever later: runSessionExpiry may sleep towards the old
	// deadline, wake early and find nothing due.
	t.deadline = now.Add(t.ttl)
	heap.Fix(&s.heap, t.pos)
	return t.ttl, true, false
}

// drop forgets a session (closed, expired, or gone from the table).
func (s *sessionTimers) drop(id lockstate.SessionID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.byID[id]; t != nil {
		if t.pos >= 0 {
			heap.Remove(&s.heap, t.pos)
		}
		delete(s.byID, id)
	}
}

// due takes the sessions whose deadline has passed out of the heap and
// marks them expiring. It also returns the next deadline, if any.
func (s *sessionTimers) due(now time.Time) (ids []lockstate.SessionID, next time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.heap) > 0 && !s.heap[0].deadline.After(now) {
		t := heap.Pop(&s.heap).(*sessionTimer)
		ids = append(ids, t.id)
	}
	if len(s.heap) > 0 {
		return ids, s.heap[0].deadline, true
	}
	return ids, time.Time{}, false
}

// sync makes the timers match the table's sessions: new ones are armed
// with a full TTL from now, vanished ones dropped, known ones kept.
func (s *sessionTimers) sync(ttls map[lockstate.SessionID]time.Duration, now time.Time) {
	s.mu.Lock()
	for id, t := range s.byID {
		if _, ok := ttls[id]; !ok {
			if t.pos >= 0 {
				heap.Remove(&s.heap, t.pos)
			}
			delete(s.byID, id)
		}
	}
	for id, ttl := range ttls {
		if s.byID[id] == nil {
			t := &sessionTimer{id: id, ttl: ttl, deadline: now.Add(ttl)}
			s.byID[id] = t
			heap.Push(&s.heap, t)
		}
	}
	s.mu.Unlock()
}

// timerHeap implements heap.Interface over deadlines.
type timerHeap []*sessionTimer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*sessionTimer)
	t.pos = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.pos = -1
	return t
}

// resyncSessions arms the leader's timers from the table. On taking
// office every session gets a full TTL from now: the new leader cannot
// know when the last keepalive reached the old one (DESIGN.md).
func (n *Node) resyncSessions(l *leadership) {
	var ttls map[lockstate.SessionID]time.Duration
	n.fsm.Read(func(t *lockstate.Table) { ttls = t.SessionTTLs() })
	l.timers.sync(ttls, n.now())
}

// keepAliveLocal is the leader's keepalive of one session.
func (n *Node) keepAliveLocal(id lockstate.SessionID) (time.Duration, error) {
	ttls, err := n.keepAliveManyLocal([]lockstate.SessionID{id})
	if err != nil {
		return 0, err
	}
	if ttls[0] == 0 {
		return 0, ErrSessionNotFound
	}
	return ttls[0], nil
}

// keepAliveManyLocal is the leader's keepalive of sessions: verify
// leadership with a quorum once, then move each session's deadline.
// ttls[i] is ids[i]'s TTL, or 0 when that session is gone (or its expiry
// has been decided): one quorum round trip serves the whole batch.
func (n *Node) keepAliveManyLocal(ids []lockstate.SessionID) ([]time.Duration, error) {
	l := n.lead.Load()
	if l == nil {
		return nil, fmt.Errorf("%w: leader not ready for keepalives", errRetry)
	}
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return nil, fmt.Errorf("%w: verify leader: %w", errRetry, err)
	}
	if n.lead.Load() != l {
		return nil, fmt.Errorf("%w: leadership changed", errRetry)
	}
	has := make([]bool, len(ids))
	n.fsm.Read(func(t *lockstate.Table) {
		for i, id := range ids {
			has[i] = t.HasSession(id)
		}
	})
	now := n.now()
	ttls := make([]time.Duration, len(ids))
	var fresh []int // created so recently that runSessionExpiry has not seen their events yet
	for i, id := range ids {
		if !has[i] {
			continue
		}
		ttl, known, expiring := l.timers.renew(id, now)
		switch {
		case expiring:
		case known:
			ttls[i] = ttl
		default:
			fresh = append(fresh, i)
		}
	}
	if len(fresh) > 0 {
		n.armFresh(l, ids, fresh, ttls, now)
	}
	return ttls, nil
}

// armFresh arms the timers of sessions ids[i], i in fresh, that the
// table has but the timers do not know yet, and sets their ttls.
func (n *Node) armFresh(l *leadership, ids []lockstate.SessionID, fresh []int, ttls []time.Duration, now time.Time) {
	n.fsm.Read(func(t *lockstate.Table) {
		for _, i := range fresh {
			if info, ok := t.Session(ids[i]); ok {
				ttls[i] = info.TTL
			}
		}
	})
	for _, i := range fresh {
		if ttls[i] > 0 {
			l.timers.arm(ids[i], ttls[i], now.Add(ttls[i]))
		}
	}
}
