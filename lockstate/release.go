package lockstate

import (
	"fmt"

	"github.com/lockd/lockd/quorum"
)

// Release gives back one hold of Name (reentrant count minus one), or, with
// RequestID, one hold of every lock that request was granted.
type Release struct {
	Session   SessionID `msgpack:"session"`
	Name      string    `msgpack:"name,omitempty"`
	RequestID string    `msgpack:"request_id,omitempty"`
	Authority
}

// Validate checks that the release names a session and exactly one of a
// lock or a request. Request ids are not checked beyond that: the table's
// own '~' ids can be released too.
func (c *Release) Validate() *Error {
	if err := requireSession(c.Session); err != nil {
		return err
	}
	if err := validAuth(c.Auth); err != nil {
		return err
	}
	switch {
	case c.Name != "" && c.RequestID != "":
		return invalidf("name and request_id are both set: a release names a lock or a request, not both")
	case c.Name != "":
		return ValidName(c.Name)
	case c.RequestID == "":
		return invalidf("name or request_id is required")
	}
	return nil
}

// apply counts the holds down, dropping those that reach 0.
func (c *Release) apply(t *Table) Result {
	s := t.sessions[c.Session]
	if s == nil {
		return Result{Err: errorf(CodeNoSession, "session %d not found", c.Session)}
	}
	if err := t.authorize(c.Auth, s, AccessWrite); err != nil {
		return Result{Err: err}
	}
	var names []string
	var r *request
	if c.Name != "" {
		names = []string{c.Name}
	} else {
		// The session's own request: another session's with the same id
		// is not this one (and none was, before ids were scoped).
		r = t.requests.of(s, c.RequestID)
		if r == nil {
			return Result{Err: errorf(CodeNoRequest, "request %q not found for session %s", c.RequestID, s.publicKey())}
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
	if err := t.authorize(c.Auth, s, AccessWrite, names...); err != nil {
		return Result{Err: err}
	}
	for _, name := range names {
		if n := t.nodes[name]; n == nil || s.holds[n] == nil {
			return Result{Err: errorf(CodeNotHeld, "session %s does not hold %q", s.publicKey(), name)}
		}
	}
	if len(names) == 0 {
		return Result{Err: errorf(CodeNotHeld, "session %s holds none of request %q's locks", s.publicKey(), c.RequestID)}
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
	if r != nil {
		r.status = Released
	}
	return Result{Released: names}
}

// Surrender hands a held lock to its waiters and queues the session again
// behind them. With nobody waiting it keeps the lock.
type Surrender struct {
	Session SessionID `msgpack:"session"`
	Name    string    `msgpack:"name"`
	Authority
}

// Validate checks that the surrender names a session and a lock.
func (c *Surrender) Validate() *Error {
	if err := requireSession(c.Session); err != nil {
		return err
	}
	if err := validAuth(c.Auth); err != nil {
		return err
	}
	return ValidName(c.Name)
}

// apply surrenders the hold if anyone waits for it.
func (c *Surrender) apply(t *Table) Result {
	_, h, err := t.heldBy(c.Session, c.Auth, c.Name)
	if err != nil {
		return Result{Err: err}
	}
	if !t.blocksSomeone(h) {
		return Result{Kept: true}
	}
	t.surrender(h)
	t.detectQueued()
	return Result{}
}

// blocksSomeone reports whether another session waits on h's name, an
// ancestor or a descendant in a mode that conflicts with h.
func (t *Table) blocksSomeone(h *hold) bool {
	n, s := h.n, h.s
	conflicts := func(w *waiter) bool {
		return w.req.s != s && (h.mode == Write || w.mode == Write)
	}
	scan := func(l *waitList) bool {
		for e := l.head; e != nil; e = e.next {
			if conflicts(e.w) {
				return true
			}
		}
		return false
	}
	if scan(&n.queue().here) || scan(&n.queue().below) {
		return true
	}
	for a := n.parent; a != nil; a = a.parent {
		if scan(&a.queue().here) {
			return true
		}
	}
	return false
}

// surrender gives up h entirely and queues its session again, behind every
// current waiter, for the same mode and weight; the regrant restores the
// hold count and the hold's value.
func (t *Table) surrender(h *hold) {
	s, n := h.s, h.n
	t.seq++
	r := &request{
		id: fmt.Sprintf("~surrender-%d", t.seq), s: s, seq: t.seq,
		specs:   []LockSpec{{Name: n.name, Mode: h.mode, Weight: h.weight, Limit: n.limit, Value: h.value}},
		require: quorum.All, need: 1, restore: h.count, status: Pending, created: t.index,
	}
	t.requests.add(r)
	t.dropHold(h, EvSurrendered)
	t.enqueue(r)
	t.candidates.add(r) // it may be grantable at once if the waiters did not conflict after all
}

// Cancel withdraws a pending request: the one RequestID names for Auth
// (Table.FindRequest's rule), of Session unless it is 0.
type Cancel struct {
	Session   SessionID `msgpack:"session,omitempty"`
	RequestID string    `msgpack:"request_id"`
	Authority
}

// Validate checks that the cancel names a request. Session 0 is valid (any
// session), and so are the table's own '~' ids.
func (c *Cancel) Validate() *Error {
	switch {
	case c.RequestID == "":
		return invalidf("request_id is required")
	case len(c.RequestID) > MaxRequestIDLen:
		return invalidf("request_id is %d bytes, over %d", len(c.RequestID), MaxRequestIDLen)
	}
	return validAuth(c.Auth)
}

// apply ends the request if it is still pending and returns its state.
func (c *Cancel) apply(t *Table) Result {
	r, err := t.findRequest(c.Auth, c.Session, c.RequestID)
	if err != nil {
		return Result{Err: err}
	}
	if r.status == Pending {
		t.fail(r, Cancelled, EvCancelled)
	}
	return Result{Request: t.requestInfo(r)}
}

// heldBy finds the hold session id has on name, for a command that acts on
// it (Surrender, Proclaim) with authority auth: session_not_found, the
// authorization's refusal, or not_held when it has none now.
func (t *Table) heldBy(id SessionID, auth, name string) (*session, *hold, *Error) {
	s := t.sessions[id]
	if s == nil {
		return nil, nil, errorf(CodeNoSession, "session %d not found", id)
	}
	if err := t.authorize(auth, s, AccessWrite, name); err != nil {
		return nil, nil, err
	}
	n := t.nodes[name]
	if n == nil || s.holds[n] == nil {
		return nil, nil, errorf(CodeNotHeld, "session %s does not hold %q", s.publicKey(), name)
	}
	return s, s.holds[n], nil
}
