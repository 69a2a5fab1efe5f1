package lockstate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lockd/lockd/quorum"
)

// validRequestID checks a client-chosen idempotency key.
func validRequestID(id string) *Error {
	if len(id) > MaxRequestIDLen {
		return errorf(CodeInvalid, "request_id is %d bytes, over %d", len(id), MaxRequestIDLen)
	}
	if !utf8.ValidString(id) {
		return errorf(CodeInvalid, "request_id is not valid UTF-8")
	}
	if id[0] == '~' {
		return errorf(CodeInvalid, "request_id %q: ids starting with '~' are reserved", id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f || c == '/' {
			return errorf(CodeInvalid, "request_id %q has a control character or '/'", id)
		}
	}
	return nil
}

// normalize checks an acquire's content and fills defaults (weight 1,
// require all) in place: the command belongs to the entry being applied.
// It returns the specs to use and k.
func normalize(c *Acquire) ([]LockSpec, quorum.Requirement, int, *Error) {
	if len(c.Locks) == 0 || len(c.Locks) > MaxLocksPerReq {
		return nil, "", 0, errorf(CodeInvalid, "a request names 1 to %d locks, not %d", MaxLocksPerReq, len(c.Locks))
	}
	req, err := quorum.Parse(string(c.Require))
	if err != nil {
		return nil, "", 0, errorf(CodeInvalid, "%v", err)
	}
	need, _ := req.Need(len(c.Locks))
	switch {
	case c.Wait < 0 || c.Wait > MaxWait:
		return nil, "", 0, errorf(CodeInvalid, "wait %v is outside [0, %v]", c.Wait, MaxWait)
	case c.HoldTTL < 0 || c.HoldTTL > MaxHoldTTL:
		return nil, "", 0, errorf(CodeInvalid, "hold_ttl %v is outside [0, %v]", c.HoldTTL, MaxHoldTTL)
	}
	specs := c.Locks
	for i, sp := range c.Locks {
		if err := ValidName(sp.Name); err != nil {
			return nil, "", 0, err.(*Error)
		}
		if sp.Mode != Read && sp.Mode != Write {
			return nil, "", 0, errorf(CodeInvalid, "lock %q: mode must be read or write", sp.Name)
		}
		if sp.Limit < 0 || sp.Limit > MaxLimit {
			return nil, "", 0, errorf(CodeInvalid, "lock %q: limit %d is outside [1, %d]", sp.Name, sp.Limit, MaxLimit)
		}
		if sp.Weight == 0 {
			sp.Weight = 1
		}
		if sp.Weight < 1 || (sp.Mode == Read && sp.Weight != 1) {
			return nil, "", 0, errorf(CodeInvalid, "lock %q: weight %d is invalid (read takes 1; write 1..limit)", sp.Name, sp.Weight)
		}
		for _, prev := range specs[:i] {
			if prev.Name == sp.Name {
				return nil, "", 0, errorf(CodeInvalid, "lock %q is named twice", sp.Name)
			}
		}
		specs[i] = sp
	}
	return specs, req, need, nil
}

func (t *Table) acquire(c *Acquire) Result {
	s := t.sessions[c.Session]
	if s == nil {
		return Result{Err: errorf(CodeNoSession, "session %d not found", c.Session)}
	}
	if c.RequestID != "" {
		if err := validRequestID(c.RequestID); err != nil {
			return Result{Err: err}
		}
		if r := t.requests[c.RequestID]; r != nil {
			if r.s != s {
				return Result{Err: errorf(CodeInvalid, "request_id %q belongs to another session", c.RequestID)}
			}
			return Result{Request: t.requestInfo(r)} // a retry: never enqueue twice
		}
	}
	specs, req, need, err := normalize(c)
	if err != nil {
		return Result{Err: err}
	}
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
	switch {
	case c.Name != "" && c.RequestID != "":
		return Result{Err: errorf(CodeInvalid, "release names a lock or a request, not both")}
	case c.Name != "":
		if err := ValidName(c.Name); err != nil {
			return Result{Err: err.(*Error)}
		}
		names = []string{c.Name}
	case c.RequestID != "":
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
	default:
		return Result{Err: errorf(CodeInvalid, "release needs a lock name or a request_id")}
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
	if err := ValidName(c.Name); err != nil {
		return Result{Err: err.(*Error)}
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
