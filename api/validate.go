package api

import (
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/quorum"
)

// Validation before proposing, with lockstate's own rules and limits: a bad
// request is answered 400 without costing a log entry. The table checks
// everything again on apply.

func validSession(id SessionID) error {
	if id == 0 {
		return invalid("session is required")
	}
	return nil
}

func validName(name string) error {
	if err := lockstate.ValidName(name); err != nil {
		return invalid("%v", errMessage(err))
	}
	return nil
}

// errMessage drops lockstate's "code: " prefix from a table error.
func errMessage(err error) string {
	if le, ok := err.(*lockstate.Error); ok {
		return le.Message
	}
	return err.Error()
}

// validRequestID applies the table's rules for client-chosen ids: ids
// starting with '~' are the table's own, and '/' would not fit in a path.
func validRequestID(id string) error {
	switch {
	case len(id) > lockstate.MaxRequestIDLen:
		return invalid("request_id is %d bytes, over %d", len(id), lockstate.MaxRequestIDLen)
	case !utf8.ValidString(id):
		return invalid("request_id is not valid UTF-8")
	case id != "" && id[0] == '~':
		return invalid("request_id %q: ids starting with '~' are reserved", id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f || c == '/' {
			return invalid("request_id %q has a control character or '/'", id)
		}
	}
	return nil
}

func inRange(what string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return invalid("%s %v is outside [%v, %v]", what, d, lo, hi)
	}
	return nil
}

// createSessionCmd validates a session request.
func createSessionCmd(req CreateSessionRequest) (*lockstate.CreateSession, error) {
	ttl := DefaultSessionTTL
	if req.TTL != nil {
		ttl = time.Duration(*req.TTL)
	}
	if err := inRange("ttl", ttl, lockstate.MinTTL, lockstate.MaxTTL); err != nil {
		return nil, err
	}
	if err := inRange("lock_delay", time.Duration(req.LockDelay), 0, lockstate.MaxLockDelay); err != nil {
		return nil, err
	}
	if len(req.Name) > lockstate.MaxSessionName || !utf8.ValidString(req.Name) {
		return nil, invalid("session name must be valid UTF-8 of at most %d bytes", lockstate.MaxSessionName)
	}
	od := lockstate.OnDeadlock(req.OnDeadlock)
	if od != "" && od != lockstate.Abort && od != lockstate.SurrenderLock {
		return nil, invalid("on_deadlock %q is not abort or surrender", req.OnDeadlock)
	}
	return &lockstate.CreateSession{Name: req.Name, TTL: ttl, OnDeadlock: od, Ordered: req.Ordered,
		LockDelay: time.Duration(req.LockDelay)}, nil
}

// acquireCmd validates an acquire; the returned command carries the
// client's wait, uncapped.
func acquireCmd(req AcquireRequest) (*lockstate.Acquire, error) {
	if err := validSession(req.Session); err != nil {
		return nil, err
	}
	if err := validRequestID(req.RequestID); err != nil {
		return nil, err
	}
	if n := len(req.Locks); n == 0 || n > lockstate.MaxLocksPerReq {
		return nil, invalid("locks must name 1 to %d locks, not %d", lockstate.MaxLocksPerReq, n)
	}
	rq, err := quorum.Parse(req.Require)
	if err != nil {
		return nil, invalid("require %q is not all, any or majority", req.Require)
	}
	if err := inRange("wait", time.Duration(req.Wait), 0, lockstate.MaxWait); err != nil {
		return nil, err
	}
	if err := inRange("hold_ttl", time.Duration(req.HoldTTL), 0, lockstate.MaxHoldTTL); err != nil {
		return nil, err
	}
	specs := make([]lockstate.LockSpec, len(req.Locks))
	seen := make(map[string]bool, len(req.Locks))
	for i, l := range req.Locks {
		sp, err := lockSpec(l)
		if err != nil {
			return nil, err
		}
		if seen[sp.Name] {
			return nil, invalid("lock %q is named twice", sp.Name)
		}
		seen[sp.Name] = true
		specs[i] = sp
	}
	return &lockstate.Acquire{Session: lockstate.SessionID(req.Session), RequestID: req.RequestID, Locks: specs,
		Require: rq, Wait: time.Duration(req.Wait), HoldTTL: time.Duration(req.HoldTTL)}, nil
}

func lockSpec(l LockSpec) (lockstate.LockSpec, error) {
	sp := lockstate.LockSpec{Name: l.Name, Mode: l.Mode.mode(), Weight: l.Weight, Limit: l.Limit}
	if err := validName(sp.Name); err != nil {
		return sp, err
	}
	if sp.Limit < 0 || sp.Limit > lockstate.MaxLimit {
		return sp, invalid("lock %q: limit %d is outside [1, %d]", sp.Name, sp.Limit, lockstate.MaxLimit)
	}
	if sp.Weight == 0 {
		sp.Weight = 1
	}
	switch {
	case sp.Weight < 1 || (sp.Mode == lockstate.Read && sp.Weight != 1):
		return sp, invalid("lock %q: weight %d is invalid (read takes 1; write 1..limit)", sp.Name, sp.Weight)
	case sp.Limit > 0 && sp.Weight > sp.Limit:
		return sp, invalid("lock %q: weight %d is over its limit %d", sp.Name, sp.Weight, sp.Limit)
	}
	return sp, nil
}

// ---- query parameters ---------------------------------------------------

func queryDuration(q url.Values, key string) (time.Duration, error) {
	v := q.Get(key)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, invalid("%s=%q is not a non-negative Go duration such as \"30s\"", key, v)
	}
	return d, nil
}

func queryInt(q url.Values, key string) (int, error) {
	v := q.Get(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, invalid("%s=%q is not an integer", key, v)
	}
	return n, nil
}

func queryUint(q url.Values, key string) (uint64, error) {
	v := q.Get(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, invalid("%s=%q is not a non-negative integer", key, v)
	}
	return n, nil
}

func querySession(q url.Values) (SessionID, error) {
	v := q.Get("session")
	if v == "" {
		return 0, invalid("the session query parameter is required")
	}
	id, err := ParseSessionID(v)
	if err != nil {
		return 0, invalid("%v", err)
	}
	return id, nil
}

func pathSession(v string) (SessionID, error) {
	id, err := ParseSessionID(v)
	if err != nil {
		return 0, invalid("%v", err)
	}
	return id, nil
}
