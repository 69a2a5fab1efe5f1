package lockstate

import (
	"cmp"
	"slices"
	"strings"
)

// maxResolutions bounds the work one entry spends breaking deadlocks. Each
// resolution ends a request or gives up a hold, so it is never reached in
// practice; the bound only keeps a bug from looping forever.
const maxResolutions = 1 << 16

// blockers calls fn for every session that w waits for: other sessions'
// conflicting holds on its name, ancestors and descendants (h set), and
// other sessions' earlier conflicting waiters there (h nil). These are the
// edges of the wait-for graph.
func (t *Table) blockers(w *waiter, fn func(s *session, h *hold)) {
	req, n, mode := w.req, w.n, w.mode
	s, sp := req.s, req.specs[w.spec]
	writeWeight := int(n.weight)
	if own := s.holds[n]; own != nil && own.mode == Write {
		writeWeight -= own.weight
	}
	full := n.limit <= 1 || writeWeight+sp.Weight > n.limit // no room beside the other write holders
	for _, h := range n.holds {
		if h.s != s && (h.mode == Write || mode == Write) && !(h.mode == Write && mode == Write && !full) {
			fn(h.s, h)
		}
	}
	conflicting := func(h *hold) bool { return h.s != s && (h.mode == Write || mode == Write) }
	for a := n.parent; a != nil; a = a.parent {
		for _, h := range a.holds {
			if conflicting(h) {
				fn(h.s, h)
			}
		}
	}
	var below func(d *node)
	below = func(d *node) {
		for child := d.children.first; child != nil; child = child.next {
			if child.readers+child.writers+child.belowReads+child.belowWrites == 0 {
				continue
			}
			for _, h := range child.holds {
				if conflicting(h) {
					fn(h.s, h)
				}
			}
			below(child)
		}
	}
	if n.belowReads+n.belowWrites > 0 {
		below(n)
	}
	if w.upgrade && s.holds[n] != nil {
		return // an upgrade does not wait for waiters
	}
	scan := func(l *waitList) {
		for e := l.head; e != nil && e.w.req.seq < req.seq; e = e.next {
			if e.w.req.s != s && (mode == Write || e.w.mode == Write) {
				fn(e.w.req.s, nil)
			}
		}
	}
	scan(&n.queue().here)
	scan(&n.queue().below)
	for a := n.parent; a != nil; a = a.parent {
		scan(&a.queue().here)
	}
}

// waitsFor returns the sessions u waits for, by id.
func (t *Table) waitsFor(u *session) []*session {
	return t.waitsForReqs(u.pending)
}

// waitsForReqs returns the sessions the given requests wait for, by id.
func (t *Table) waitsForReqs(reqs []*request) []*session {
	set := make(map[*session]bool)
	for _, r := range reqs {
		for _, w := range r.waiters {
			t.blockers(w, func(s *session, _ *hold) { set[s] = true })
		}
	}
	out := make([]*session, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *session) int { return cmp.Compare(a.id, b.id) })
	return out
}

// findCycle returns a wait-for cycle through start (start first), or nil.
// With via set, only cycles whose first edge comes from that request are
// sought. The search visits edges in session-id order, so it is
// deterministic.
func (t *Table) findCycle(start *session, via *request) []*session {
	visited := make(map[*session]bool)
	var path []*session
	var dfs func(u *session) bool
	dfs = func(u *session) bool {
		path = append(path, u)
		visited[u] = true
		var next []*session
		if u == start && via != nil {
			next = t.waitsForReqs([]*request{via})
		} else {
			next = t.waitsFor(u)
		}
		for _, v := range next {
			if v == start || (!visited[v] && dfs(v)) {
				return true
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if dfs(start) {
		return path
	}
	return nil
}

// detectQueued breaks the cycles that the requests queued since its last
// call closed, each right away (see suspect). The first search from each
// follows only that request's edges, which keeps a session with many
// pending requests from paying for all of them on every enqueue.
func (t *Table) detectQueued() {
	for i := 0; i < len(t.justQueued); i++ { // resolutions may queue more
		r := t.justQueued[i]
		if r.status != Pending || (len(r.s.holds) == 0 && len(r.s.pending) <= 1) {
			continue // nobody can be waiting for its session: no cycle can close through it
		}
		t.detectFrom(r.s, r)
	}
	clear(t.justQueued)
	t.justQueued = t.justQueued[:0]
}

// detectFrom breaks every cycle through start; with via set, the first
// search only follows that request's edges.
func (t *Table) detectFrom(start *session, via *request) {
	work := []*session{start}
	for steps := 0; len(work) > 0 && steps < maxResolutions; steps++ {
		s := work[0]
		if t.sessions[s.id] != s || len(s.pending) == 0 || (via != nil && via.status != Pending) {
			work, via = work[1:], nil
			continue
		}
		cycle := t.findCycle(s, via)
		via = nil // after a resolution anything of s's may close a cycle
		if cycle == nil {
			work = work[1:]
			continue
		}
		if again := t.resolve(cycle); again != nil {
			work = append(work, again)
		}
	}
}

// The wait-for graph gains edges in exactly these places, and each of them
// records what to search, so that a cycle is broken in the entry that
// closes it:
//
//   - enqueueAs: a queued request waits for conflicting holders and
//     earlier conflicting waiters. It goes on justQueued; its cycles are
//     broken at once (Acquire and Surrender call detectQueued right after
//     queueing), and recheck catches any left.
//   - addHold: a new hold is a new edge for the upgrade waiters on related
//     names, which wait for holders only, and for the write waiters on a
//     semaphore that it filled (suspectNewEdges).
//   - upgradeHold: a stronger hold also makes the waiters it went ahead of
//     wait for it (its session and suspectNewEdges).
//   - dropHold: when a session gives up a name on which its own upgrade is
//     queued, the upgrade becomes an ordinary request and waits for the
//     earlier waiters too (its session).
//
// Nothing else adds an edge: releases, expiries, cancels, timeouts,
// reentrant grants and lock-delays only remove edges (a lock-delay blocks
// without a session to wait for). Searches start from the sessions that
// gained edges, because a new cycle passes through one of them.

// suspect marks s for a full cycle check at the end of the entry: it
// gained wait-for edges other than by queueing a request.
func (t *Table) suspect(s *session) {
	if !slices.Contains(t.suspects, s) {
		t.suspects = append(t.suspects, s)
	}
}

// suspectNewEdges marks the sessions that a new or stronger hold on n can
// give new wait-for edges to a holder they did not wait for before. Any
// other waiter that conflicts with the hold arrived after its request and
// already waited for its session as an earlier waiter. The exceptions:
// upgrades on related names (they skip waiters), and write waiters on a
// semaphore the grant filled (they now wait for every write holder).
func (t *Table) suspectNewEdges(n *node) {
	if t.queuedUpgrades > 0 {
		for a := n; a != nil; a = a.parent {
			for e := a.queue().upgrades.head; e != nil; e = e.next {
				t.suspect(e.w.req.s)
			}
		}
		for e := n.queue().below.head; e != nil; e = e.next {
			if e.w.upgrade {
				t.suspect(e.w.req.s)
			}
		}
	}
	if n.limit > 1 {
		for e := n.queue().hereWrites.head; e != nil; e = e.next {
			t.suspect(e.w.req.s)
		}
	}
}

// recheck breaks the cycles through the suspects, in the order they were
// marked, settling what each resolution freed, and then through any
// request still on justQueued.
func (t *Table) recheck() {
	for len(t.suspects) > 0 || len(t.justQueued) > 0 {
		if len(t.suspects) == 0 {
			t.detectQueued()
			t.settle()
			continue
		}
		s := t.suspects[0]
		t.suspects = t.suspects[1:]
		if t.sessions[s.id] == s && len(s.pending) > 0 {
			t.detectFrom(s, nil)
			t.settle()
		}
	}
}

// resolve breaks one cycle. The victim is the youngest session in it. With
// on_deadlock=surrender it gives up the holds its predecessor in the cycle
// waits for and queues for them again (returned, to be checked for new
// cycles); otherwise, or when it holds nothing the predecessor waits for,
// its pending requests that wait for its successor fail with deadlock.
func (t *Table) resolve(cycle []*session) *session {
	victimAt := 0
	for i, s := range cycle {
		if s.id > cycle[victimAt].id {
			victimAt = i
		}
	}
	victim := cycle[victimAt]
	successor, predecessor := cycle[(victimAt+1)%len(cycle)], cycle[(victimAt+len(cycle)-1)%len(cycle)]
	if victim.onDeadlock == SurrenderLock {
		seen := make(map[*hold]bool)
		var given []*hold
		for _, r := range predecessor.pending {
			for _, w := range r.waiters {
				t.blockers(w, func(s *session, h *hold) {
					if s == victim && h != nil && !seen[h] {
						seen[h] = true
						given = append(given, h)
					}
				})
			}
		}
		if len(given) > 0 {
			t.counters.DeadlockSurrenders++
			slices.SortFunc(given, func(a, b *hold) int { return strings.Compare(a.n.name, b.n.name) })
			for _, h := range given {
				t.surrender(h)
			}
			t.settle()
			return victim
		}
	}
	var failing []*request
	for _, r := range victim.pending {
		hit := false
		for _, w := range r.waiters {
			t.blockers(w, func(s *session, _ *hold) { hit = hit || s == successor })
		}
		if hit {
			failing = append(failing, r)
		}
	}
	for _, r := range failing {
		t.fail(r, Deadlock, EvDeadlock)
	}
	t.settle()
	return nil
}
