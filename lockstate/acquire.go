package lockstate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lockd/lockd/quorum"
)

// fillDefaults sets each spec's weight (0 means 1) in place, the command
// being the entry's own, and returns the requirement and how many locks
// it needs. c has been validated.
func fillDefaults(c *Acquire) (quorum.Requirement, int) {
	for i := range c.Locks {
		c.Locks[i].Weight = c.Locks[i].weight()
	}
	req, _ := quorum.Parse(string(c.Require))
	need, _ := req.Need(len(c.Locks))
	return req, need
}

func (t *Table) acquire(c *Acquire) Result {
	s := t.sessions[c.Session]
	if s == nil {
		return Result{Err: errorf(CodeNoSession, "session %d not found", c.Session)}
	}
	if r := t.requests[c.RequestID]; c.RequestID != "" && r != nil {
		if r.s != s {
			return Result{Err: errorf(CodeInvalid, "request_id %q belongs to another session", c.RequestID)}
		}
		return Result{Request: t.requestInfo(r)} // a retry: never enqueue twice
	}
	req, need := fillDefaults(c)
	specs := c.Locks
	for _, sp := range specs {
		n := t.nodes[sp.Name]
		if n != nil && n.inUse() && sp.Limit != 0 && sp.Limit != n.limit {
			return Result{Err: errorf(CodeLimitMismatch, "lock %q has limit %d, request says %d", sp.Name, n.limit, sp.Limit)}
		}
		lim := max(sp.Limit, 1)
		if n != nil {
			lim = n.effLimit(sp)
		}
		if sp.Weight > lim {
			return Result{Err: errorf(CodeInvalid, "lock %q: weight %d is over its limit %d", sp.Name, sp.Weight, lim)}
		}
	}
	if s.ordered {
		if err := t.checkOrder(s, specs); err != nil {
			return Result{Err: err}
		}
	}

	id := c.RequestID
	if id == "" {
		id = "~auto-" + strconv.FormatUint(t.index, 10)
	}
	t.seq++
	r := &request{id: id, s: s, seq: t.seq, specs: specs, require: req, need: need,
		holdTTL: c.HoldTTL, status: Pending, created: t.index}
	t.requests[id] = r

	var okBuf [8]bool
	var pickBuf [8]int
	ok := okBuf[:0]
	for i, sp := range specs {
		n := t.ensure(sp.Name)
		ok = append(ok, t.grantable(r, i, n, s.holds[n] != nil))
	}
	switch chosen := quorum.AppendPick(pickBuf[:0], need, ok); {
	case chosen != nil:
		t.grant(r, chosen)
	case c.Wait == 0:
		t.finish(r, TimedOut)
	default:
		r.deadline = t.clock + int64(c.Wait)
		t.enqueue(r)
		t.addDeadline(&deadline{at: r.deadline, kind: dlWait, seq: r.seq, r: r})
		t.detect(r)
		if r.status == Pending {
			for _, w := range r.waiters {
				t.touch(w.n)
			}
		}
	}
	return Result{Request: t.requestInfo(r)}
}

// checkOrder enforces ordered locking: every name not already held must sort
// after every name the session holds or waits for.
func (t *Table) checkOrder(s *session, specs []LockSpec) *Error {
	top := ""
	for n := range s.holds {
		top = max(top, n.name)
	}
	for _, p := range s.pending {
		for _, sp := range p.specs {
			top = max(top, sp.Name)
		}
	}
	for _, sp := range specs {
		if n := t.nodes[sp.Name]; n != nil && s.holds[n] != nil {
			continue
		}
		if sp.Name <= top {
			return errorf(CodePoorlyOrdered, "ordered session: %q does not sort after %q", sp.Name, top)
		}
	}
	return nil
}

func (t *Table) release(c *Release) Result {
	s := t.sessions[c.Session]
	if s == nil {
		return Result{Err: errorf(CodeNoSession, "session %d not found", c.Session)}
	}
	var names []string
	if c.Name != "" {
		names = []string{c.Name}
	} else {
		r := t.requests[c.RequestID]
		if r == nil || r.s != s {
			return Result{Err: errorf(CodeNoRequest, "request %q not found for session %d", c.RequestID, s.id)}
		}
		if r.status != Granted { // released already: a retried release must not drop other holds
			return Result{Err: errorf(CodeNotHeld, "request %q is %s, not granted", r.id, r.status)}
		}
		for _, g := range r.granted {
			if n := t.nodes[g.Name]; n != nil && s.holds[n] != nil {
				names = append(names, g.Name)
			}
		}
	}
	for _, name := range names {
		if n := t.nodes[name]; n == nil || s.holds[n] == nil {
			return Result{Err: errorf(CodeNotHeld, "session %d does not hold %q", s.id, name)}
		}
	}
	if len(names) == 0 {
		return Result{Err: errorf(CodeNotHeld, "session %d holds none of request %q's locks", s.id, c.RequestID)}
	}
	for _, name := range names {
		n := t.nodes[name]
		h := s.holds[n]
		if h.count--; h.count == 0 {
			t.dropHold(h, EvReleased)
		} else {
			t.touch(n)
		}
	}
	if c.RequestID != "" {
		t.requests[c.RequestID].status = Released
	}
	return Result{Released: names}
}

func (t *Table) surrenderCmd(c *Surrender) Result {
	s := t.sessions[c.Session]
	if s == nil {
		return Result{Err: errorf(CodeNoSession, "session %d not found", c.Session)}
	}
	n := t.nodes[c.Name]
	if n == nil || s.holds[n] == nil {
		return Result{Err: errorf(CodeNotHeld, "session %d does not hold %q", s.id, c.Name)}
	}
	h := s.holds[n]
	if !t.blocksSomeone(h) {
		return Result{Kept: true}
	}
	t.detect(t.surrender(h))
	return Result{}
}

// blocksSomeone reports whether another session waits on h's name, an
// ancestor or a descendant in a mode that conflicts with h.
func (t *Table) blocksSomeone(h *hold) bool {
	n, s := h.n, h.s
	conflicts := func(w *waiter) bool {
		return w.req.s != s && (h.mode == Write || w.mode == Write)
	}
	scan := func(l *wlist) bool {
		for e := l.head; e != nil; e = e.next {
			if conflicts(e.w) {
				return true
			}
		}
		return false
	}
	if scan(&n.qs().own) || scan(&n.qs().sub) {
		return true
	}
	for a := n.parent; a != nil; a = a.parent {
		if scan(&a.qs().own) {
			return true
		}
	}
	return false
}

// surrender gives up h entirely and queues its session again, behind every
// current waiter, for the same mode and weight; the regrant restores the
// hold count.
func (t *Table) surrender(h *hold) *request {
	s, n := h.s, h.n
	t.seq++
	r := &request{
		id: fmt.Sprintf("~surrender-%d", t.seq), s: s, seq: t.seq,
		specs:   []LockSpec{{Name: n.name, Mode: h.mode, Weight: h.weight, Limit: n.limit}},
		require: quorum.All, need: 1, restore: h.count, status: Pending, created: t.index,
	}
	t.requests[r.id] = r
	t.dropHold(h, EvSurrendered)
	t.enqueue(r)
	t.cands.add(r) // it may be grantable at once if the waiters did not conflict after all
	return r
}

func (t *Table) cancel(c *Cancel) Result {
	r := t.requests[c.RequestID]
	if r == nil || (c.Session != 0 && r.s.id != c.Session) {
		return Result{Err: errorf(CodeNoRequest, "request %q not found", c.RequestID)}
	}
	if r.status == Pending {
		t.fail(r, Cancelled, EvCancelled)
	}
	return Result{Request: t.requestInfo(r)}
}

// requestInfo returns the public view of r as of now. A granted request
// says "granted" only while its session still holds every name it was
// granted with the token it was granted: after its hold ended (release,
// hold_ttl, surrender, a deadlock surrender) it says "released", so an
// idempotent retry or a re-attach is never told it holds a lock that
// another session may hold now. A later upgrade changes the hold's token
// and makes it say "released" too: erring on the side that never lets two
// clients believe they hold conflicting locks.
func (t *Table) requestInfo(r *request) *RequestInfo {
	info := r.info()
	if r.status != Granted {
		return info
	}
	for _, g := range r.granted {
		n := t.nodes[g.Name]
		if n == nil {
			info.Status = Released
			break
		}
		if h := r.s.holds[n]; h == nil || h.token != g.Token {
			info.Status = Released
			break
		}
	}
	return info
}

// info returns the public view of r as recorded.
func (r *request) info() *RequestInfo {
	// specs never change and granted is complete once set: share them.
	return &RequestInfo{
		ID: r.id, Session: r.s.id, Status: r.status, Token: r.token,
		Granted: r.granted, Locks: r.specs,
		Seq: r.seq, Created: r.created, Ended: r.ended, Deadline: r.deadline,
	}
}

// sortNames sorts names byte-wise, for deterministic output.
func sortNames(names []string) { slices.SortFunc(names, strings.Compare) }
