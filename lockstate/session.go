package lockstate

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// CreateSession opens a session owned by a client.
type CreateSession struct {
	Name       string        `msgpack:"name,omitempty"`
	TTL        time.Duration `msgpack:"ttl"`
	OnDeadlock OnDeadlock    `msgpack:"on_deadlock,omitempty"`
	Ordered    bool          `msgpack:"ordered,omitempty"`
	LockDelay  time.Duration `msgpack:"lock_delay,omitempty"`
}

// Validate checks the session options.
func (c *CreateSession) Validate() *Error {
	if err := inRange("ttl", c.TTL, MinTTL, MaxTTL); err != nil {
		return err
	}
	if err := inRange("lock_delay", c.LockDelay, 0, MaxLockDelay); err != nil {
		return err
	}
	if len(c.Name) > MaxSessionName || !utf8.ValidString(c.Name) {
		return invalidf("name must be valid UTF-8 of at most %d bytes", MaxSessionName)
	}
	if c.OnDeadlock != "" && c.OnDeadlock != Abort && c.OnDeadlock != SurrenderLock {
		return invalidf("on_deadlock %q is not abort or surrender", c.OnDeadlock)
	}
	return nil
}

// apply opens the session; its id is the entry's index.
func (c *CreateSession) apply(t *Table) Result {
	id := SessionID(t.index)
	policy := c.OnDeadlock
	if policy == "" {
		policy = Abort
	}
	t.sessions[id] = &session{
		id: id, name: c.Name, ttl: c.TTL, onDeadlock: policy, ordered: c.Ordered, lockDelay: c.LockDelay,
		holds: make(map[*node]*hold),
	}
	t.emit(EvSessionCreated, id, "", "", 0)
	return Result{Session: id}
}

// CloseSession ends a session cleanly: its holds are released and its
// pending requests cancelled.
type CloseSession struct {
	Session SessionID `msgpack:"session"`
}

// Validate checks that a session is named.
func (c *CloseSession) Validate() *Error { return requireSession(c.Session) }

// apply releases the session's holds and cancels its requests.
func (c *CloseSession) apply(t *Table) Result { return t.endSession(c.Session, false) }

// ExpireSession ends a session whose keepalives stopped: like CloseSession,
// and the names it held stay blocked for its lock-delay.
type ExpireSession struct {
	Session SessionID `msgpack:"session"`
}

// Validate checks that a session is named.
func (c *ExpireSession) Validate() *Error { return requireSession(c.Session) }

// apply is CloseSession's, and blocks the names for the lock-delay.
func (c *ExpireSession) apply(t *Table) Result { return t.endSession(c.Session, true) }

// endSession closes or expires a session: every hold is released (in name
// order), every pending request cancelled (in arrival order). An expired
// session's names stay blocked for its lock-delay.
func (t *Table) endSession(id SessionID, expired bool) Result {
	s := t.sessions[id]
	if s == nil {
		return Result{Err: errorf(CodeNoSession, "session %d not found", id)}
	}
	for _, r := range slices.Clone(s.pending) {
		t.fail(r, Cancelled, EvCancelled)
	}
	kind := EvReleased
	if expired {
		kind = EvExpired
	}
	for _, h := range s.sortedHolds() {
		n := h.n
		t.dropHold(h, kind)
		if expired && s.lockDelay > 0 {
			t.setDelay(n, t.clock+int64(s.lockDelay))
		}
	}
	for _, r := range s.done {
		if t.requests[r.id] == r {
			delete(t.requests, r.id)
		}
	}
	delete(t.sessions, id)
	if expired {
		t.emit(EvSessionExpired, id, "", "", 0)
	} else {
		t.emit(EvSessionClosed, id, "", "", 0)
	}
	return Result{}
}

// sortedHolds returns the session's holds in name order.
func (s *session) sortedHolds() []*hold {
	hs := make([]*hold, 0, len(s.holds))
	for _, h := range s.holds {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b *hold) int { return strings.Compare(a.n.name, b.n.name) })
	return hs
}

// setDelay blocks n (and so its ancestors and descendants) until the table
// clock reaches until.
func (t *Table) setDelay(n *node, until int64) {
	if until <= n.delayUntil {
		return
	}
	if n.delayUntil == 0 {
		for a := n.parent; a != nil; a = a.parent {
			a.belowDelays++
		}
	}
	n.delayUntil = until
	t.touch(n)
	t.addDeadline(&deadline{at: until, kind: dlDelay, name: n.name, n: n})
}

func (t *Table) clearDelay(n *node) {
	n.delayUntil = 0
	for a := n.parent; a != nil; a = a.parent {
		a.belowDelays--
	}
	t.touch(n)
	t.wake(n)
}
