package lockstate

import (
	"time"
	"unicode/utf8"

	"github.com/lockd/lockd/quorum"
)

// The content rules of every command, written once: the API calls Validate
// to answer a bad request before proposing it, and Table.Apply calls it
// again on every entry before looking at the table. Each message starts
// with the offending field, as a client sent it.

// invalidf returns a CodeInvalid error.
func invalidf(format string, args ...any) *Error { return errorf(CodeInvalid, format, args...) }

func requireSession(id SessionID) *Error {
	if id == 0 {
		return invalidf("session is required")
	}
	return nil
}

// inRange checks a duration field against [lo, hi].
func inRange(field string, d, lo, hi time.Duration) *Error {
	if d < lo || d > hi {
		return invalidf("%s %v is outside [%v, %v]", field, d, lo, hi)
	}
	return nil
}

// validRequestID checks a client-chosen idempotency key. Ids starting with
// '~' are the table's own (see Acquire.apply and surrender), and '/' would
// not fit in a URL path.
func validRequestID(id string) *Error {
	switch {
	case len(id) > MaxRequestIDLen:
		return invalidf("request_id is %d bytes, over %d", len(id), MaxRequestIDLen)
	case !utf8.ValidString(id):
		return invalidf("request_id is not valid UTF-8")
	case id != "" && id[0] == '~':
		return invalidf("request_id %q: ids starting with '~' are reserved", id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f || c == '/' {
			return invalidf("request_id %q has a control character or '/'", id)
		}
	}
	return nil
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

// Validate checks that a session is named.
func (c *CloseSession) Validate() *Error { return requireSession(c.Session) }

// Validate checks that a session is named.
func (c *ExpireSession) Validate() *Error { return requireSession(c.Session) }

// Validate checks the request and each of its locks. A spec's weight 0
// stands for 1; whether a weight fits a limit the table already has is
// decided on apply.
func (c *Acquire) Validate() *Error {
	if err := requireSession(c.Session); err != nil {
		return err
	}
	if err := validRequestID(c.RequestID); err != nil {
		return err
	}
	if n := len(c.Locks); n == 0 || n > MaxLocksPerReq {
		return invalidf("locks must name 1 to %d locks, not %d", MaxLocksPerReq, n)
	}
	if _, err := quorum.Parse(string(c.Require)); err != nil {
		return invalidf("require %q is not all, any or majority", c.Require)
	}
	if err := inRange("wait", c.Wait, 0, MaxWait); err != nil {
		return err
	}
	if err := inRange("hold_ttl", c.HoldTTL, 0, MaxHoldTTL); err != nil {
		return err
	}
	for i, sp := range c.Locks {
		if err := sp.validate(); err != nil {
			return err
		}
		for _, prev := range c.Locks[:i] {
			if prev.Name == sp.Name {
				return invalidf("lock %q is named twice", sp.Name)
			}
		}
	}
	return nil
}

// validate checks one lock of an acquire.
func (sp LockSpec) validate() *Error {
	if err := ValidName(sp.Name); err != nil {
		return err
	}
	if sp.Mode != Read && sp.Mode != Write {
		return invalidf("lock %q: mode must be read or write", sp.Name)
	}
	if sp.Limit < 0 || sp.Limit > MaxLimit {
		return invalidf("lock %q: limit %d is outside [0, %d]", sp.Name, sp.Limit, MaxLimit)
	}
	w := sp.weight()
	switch {
	case w < 1 || (sp.Mode == Read && w != 1):
		return invalidf("lock %q: weight %d is invalid (read takes 1; write 1..limit)", sp.Name, w)
	case sp.Limit > 0 && w > sp.Limit:
		return invalidf("lock %q: weight %d is over its limit %d", sp.Name, w, sp.Limit)
	}
	return nil
}

// weight is the permits the spec takes: Weight, where 0 means 1.
func (sp LockSpec) weight() int {
	if sp.Weight == 0 {
		return 1
	}
	return sp.Weight
}

// Validate checks that the release names a session and exactly one of a
// lock or a request. Request ids are not checked beyond that: the table's
// own '~' ids can be released too.
func (c *Release) Validate() *Error {
	if err := requireSession(c.Session); err != nil {
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

// Validate checks that the surrender names a session and a lock.
func (c *Surrender) Validate() *Error {
	if err := requireSession(c.Session); err != nil {
		return err
	}
	return ValidName(c.Name)
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
	return nil
}

// Validate accepts every Tick.
func (*Tick) Validate() *Error { return nil }
