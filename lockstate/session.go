package lockstate

import (
	"slices"
	"strconv"
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
	// Key is the session's public id, drawn at random by the leader before
	// it proposes (raftnode). "" (entries written before keys) makes the
	// session's id in decimal its key.
	Key string `msgpack:"key,omitempty"`
	// Authority is the ACL token that creates, and so owns, the session.
	Authority
	Limits *Limits `msgpack:"limits,omitempty"`
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
	if err := ValidKey(c.Key); err != nil {
		return err
	}
	if err := validAuth(c.Auth); err != nil {
		return err
	}
	return c.Limits.validate()
}

// ValidKey reports why key cannot be a session's key, or nil: a key is
// MinKeyLen to MaxKeyLen characters of base64url, not all digits (a
// decimal key is an old session's id); "" is a session from before keys.
func ValidKey(key string) *Error {
	if key == "" {
		return nil
	}
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return invalidf("key must be %d to %d characters", MinKeyLen, MaxKeyLen)
	}
	digits := true
	for i := 0; i < len(key); i++ {
		c := key[i]
		digits = digits && c >= '0' && c <= '9'
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return invalidf("key must be base64url")
		}
	}
	if digits {
		return invalidf("key must not be all digits")
	}
	return nil
}

// publicKey is the id clients know the session by.
func (s *session) publicKey() string { return PublicID(s.id, s.key) }

// PublicID is the id clients know a session by: its key, or for a session
// created before keys (key ""), its id in decimal. Results and events
// carry the raw key, so that they stay what older builds produced.
func PublicID(id SessionID, key string) string {
	if key != "" {
		return key
	}
	return strconv.FormatUint(uint64(id), 10)
}

// SessionByKey returns the session whose public id is key.
func (t *Table) SessionByKey(key string) (SessionID, bool) {
	if s := t.byKey[key]; s != nil {
		return s.id, true
	}
	if key == "" || key[0] == '0' || len(key) > 20 {
		return 0, false
	}
	id, err := strconv.ParseUint(key, 10, 64)
	if s := t.sessions[SessionID(id)]; err == nil && s != nil && s.key == "" {
		return s.id, true
	}
	return 0, false
}

// authorizeOwner checks the token that creates a session: it must exist and
// have write access somewhere.
func (t *Table) authorizeOwner(auth string) *Error {
	if err := t.authorize(auth, nil, AccessWrite); err != nil || auth == "" {
		return err
	}
	if !t.acl.tokens[auth].writesSomewhere() {
		return errorf(CodeForbidden, "token %s has no write access: it cannot own a session", auth)
	}
	return nil
}

// apply opens the session; its id is the entry's index.
func (c *CreateSession) apply(t *Table) Result {
	if err := t.authorizeOwner(c.Auth); err != nil {
		return Result{Err: err}
	}
	if c.Limits != nil && c.Limits.Sessions > 0 && len(t.sessions) >= c.Limits.Sessions {
		return Result{Err: errorf(CodeLimit, "the cluster has %d sessions, its limit", len(t.sessions))}
	}
	if err := c.Limits.checkTokenSessions(t, c.Auth); err != nil {
		return Result{Err: err}
	}
	if c.Key != "" && t.byKey[c.Key] != nil {
		return Result{Err: errorf(CodeInvalid, "session key already in use")}
	}
	id := SessionID(t.index)
	policy := c.OnDeadlock
	if policy == "" {
		policy = Abort
	}
	s := &session{
		id: id, name: c.Name, ttl: c.TTL, onDeadlock: policy, ordered: c.Ordered, lockDelay: c.LockDelay,
		key: c.Key, owner: c.Auth, holds: make(map[*node]*hold),
	}
	t.addSession(s)
	t.emit(EvSessionCreated, s, "", "", 0)
	return Result{Session: id, Key: s.key}
}

func (t *Table) addSession(s *session) {
	t.sessions[s.id] = s
	t.own(s.owner, 1, 0)
	if s.key != "" {
		t.byKey[s.key] = s
	}
}

// CloseSession ends a session cleanly: its holds are released and its
// pending requests cancelled.
type CloseSession struct {
	Session SessionID `msgpack:"session"`
	Authority
}

// Validate checks that a session is named.
func (c *CloseSession) Validate() *Error {
	if err := requireSession(c.Session); err != nil {
		return err
	}
	return validAuth(c.Auth)
}

// apply releases the session's holds and cancels its requests.
func (c *CloseSession) apply(t *Table) Result {
	if s := t.sessions[c.Session]; s != nil {
		if err := t.authorize(c.Auth, s, AccessWrite); err != nil {
			return Result{Err: err}
		}
	}
	return t.endSession(c.Session, false)
}

// ExpireSession ends a session whose keepalives stopped: like CloseSession,
// and the names it held stay blocked for its lock-delay.
type ExpireSession struct {
	Session SessionID `msgpack:"session"`
}

// Validate checks that a session is named.
func (c *ExpireSession) Validate() *Error { return requireSession(c.Session) }

// apply is CloseSession's, and blocks the names for the lock-delay.
func (c *ExpireSession) apply(t *Table) Result {
	res := t.endSession(c.Session, true)
	if res.Err == nil {
		t.counters.ExpiryEntries++
	}
	return res
}

// MaxExpireBatch bounds the sessions one ExpireSessions ends: its entry
// stays small (a few bytes a session) and its apply short, since the
// table applies nothing else meanwhile.
const MaxExpireBatch = 1024

// ExpireSessions ends many sessions whose keepalives stopped, in the
// order given (the leader gives its deadline order), each as an
// ExpireSession would: a mass expiry is one entry, not one per session. A
// session that is gone already (closed or expired by an earlier entry) is
// skipped: the leader decided every expiry before this entry applied, and
// a session closed meanwhile must not undo the others'.
type ExpireSessions struct {
	Sessions []SessionID `msgpack:"sessions"`
}

// Validate checks that one to MaxExpireBatch sessions are named, each
// once.
func (c *ExpireSessions) Validate() *Error {
	if len(c.Sessions) == 0 || len(c.Sessions) > MaxExpireBatch {
		return invalidf("sessions: %d named, want 1 to %d", len(c.Sessions), MaxExpireBatch)
	}
	seen := make(map[SessionID]bool, len(c.Sessions)) // membership only: no order leaks
	for _, id := range c.Sessions {
		if err := requireSession(id); err != nil {
			return err
		}
		if seen[id] {
			return invalidf("session %d named twice", id)
		}
		seen[id] = true
	}
	return nil
}

// apply expires each named session that still exists, in order.
func (c *ExpireSessions) apply(t *Table) Result {
	ended := false
	for _, id := range c.Sessions {
		if t.sessions[id] != nil {
			t.endSession(id, true)
			ended = true
		}
	}
	if ended {
		t.counters.ExpiryEntries++
	}
	return Result{}
}

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
		t.requests.remove(r)
	}
	delete(t.sessions, id)
	t.own(s.owner, -1, 0)
	delete(t.byKey, s.key)
	if expired {
		t.emit(EvSessionExpired, s, "", "", 0)
	} else {
		t.emit(EvSessionClosed, s, "", "", 0)
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
