package lockstate

// Limits caps what the table takes on. The leader stamps its configured
// limits into each CreateSession and Acquire it proposes, so that apply
// stays a function of the entry alone while operators may change the
// limits (restarting the leader with other flags). A zero field is no
// limit; an entry without Limits has none.
type Limits struct {
	Sessions        int `msgpack:"sessions,omitempty"`          // live sessions in the table
	HoldsPerSession int `msgpack:"holds_per_session,omitempty"` // names a session holds or waits for
	WaitersPerName  int `msgpack:"waiters_per_name,omitempty"`  // requests queued on one name
	Waiters         int `msgpack:"waiters,omitempty"`           // requests queued in the table
	// SessionsPerToken and WaitersPerToken cap what one ACL token owns:
	// its live sessions, and the requests its sessions have queued. A
	// token's own TokenLimits override them. Sessions without a token
	// (no ACLs) are not counted.
	SessionsPerToken int `msgpack:"sessions_per_token,omitempty"`
	WaitersPerToken  int `msgpack:"waiters_per_token,omitempty"`
}

// PerToken reports whether l carries a per-token limit (log format 4).
func (l *Limits) PerToken() bool {
	return l != nil && (l.SessionsPerToken != 0 || l.WaitersPerToken != 0)
}

// TokenLimits are a token's own caps, which override the cluster's
// per-token limits for it: 0 keeps the cluster's, NoLimit lifts it, a
// positive value replaces it.
type TokenLimits struct {
	Sessions int `msgpack:"sessions,omitempty" json:"sessions,omitempty"` // live sessions it owns
	Waiters  int `msgpack:"waiters,omitempty" json:"waiters,omitempty"`   // requests its sessions have queued
}

// NoLimit in a TokenLimits field lifts the cluster's limit for the token.
const NoLimit = -1

func (l *TokenLimits) validate() *Error {
	if l == nil {
		return nil
	}
	for _, v := range [...]int{l.Sessions, l.Waiters} {
		if v < NoLimit || v > maxLimitValue {
			return invalidf("token limits must be -1 (none), 0 (the cluster's) or up to %d", maxLimitValue)
		}
	}
	return nil
}

// ownerCounts is what one token owns, for the per-token limits.
type ownerCounts struct{ sessions, waiting int }

// tokenCap returns the cap on what owner may have, given the cluster's
// limit and the token's own override (see TokenLimits); 0 is none.
func (t *Table) tokenCap(owner string, cluster int, own func(*TokenLimits) int) int {
	if tok := t.acl.tokens[owner]; tok != nil && tok.limits != nil {
		switch v := own(tok.limits); {
		case v == NoLimit:
			return 0
		case v > 0:
			return v
		}
	}
	return cluster
}

// checkTokenSessions refuses a new session for owner past its cap.
func (l *Limits) checkTokenSessions(t *Table, owner string) *Error {
	cluster := 0
	if l != nil {
		cluster = l.SessionsPerToken
	}
	if owner == "" {
		return nil
	}
	limit := t.tokenCap(owner, cluster, func(tl *TokenLimits) int { return tl.Sessions })
	if n := t.owners[owner].sessions; limit > 0 && n >= limit {
		return errorf(CodeLimit, "token %s has %d live sessions, its limit (sessions per token)", owner, n)
	}
	return nil
}

// checkTokenWaiters refuses to queue a request of owner's past its cap.
func (l *Limits) checkTokenWaiters(t *Table, owner string) *Error {
	cluster := 0
	if l != nil {
		cluster = l.WaitersPerToken
	}
	if owner == "" {
		return nil
	}
	limit := t.tokenCap(owner, cluster, func(tl *TokenLimits) int { return tl.Waiters })
	if n := t.owners[owner].waiting; limit > 0 && n >= limit {
		return errorf(CodeLimit, "token %s has %d requests waiting, its limit (waiters per token)", owner, n)
	}
	return nil
}

// own changes owner's counts by the given deltas.
func (t *Table) own(owner string, sessions, waiting int) {
	if owner == "" {
		return
	}
	c := t.owners[owner]
	c.sessions += sessions
	c.waiting += waiting
	if c == (ownerCounts{}) {
		delete(t.owners, owner)
		return
	}
	if t.owners == nil {
		t.owners = make(map[string]ownerCounts)
	}
	t.owners[owner] = c
}

// recountOwners rebuilds the per-token counts from the sessions (a loaded
// table learns the owners after its requests).
func (t *Table) recountOwners() {
	t.owners = nil
	for _, s := range t.sessions {
		t.own(s.owner, 1, len(s.pending))
	}
}

const maxLimitValue = 1 << 30

func (l *Limits) validate() *Error {
	if l == nil {
		return nil
	}
	for _, v := range [...]int{l.Sessions, l.HoldsPerSession, l.WaitersPerName, l.Waiters, l.SessionsPerToken, l.WaitersPerToken} {
		if v < 0 || v > maxLimitValue {
			return invalidf("limits must be in [0, %d]", maxLimitValue)
		}
	}
	return nil
}

// checkHolds refuses a request that would take session s past
// HoldsPerSession names held or waited for.
func (l *Limits) checkHolds(t *Table, s *session, specs []LockSpec) *Error {
	if l == nil || l.HoldsPerSession == 0 {
		return nil
	}
	count := len(s.holds)
	for _, r := range s.pending {
		count += len(r.specs)
	}
	for _, sp := range specs {
		if n := t.nodes[sp.Name]; n == nil || s.holds[n] == nil {
			count++
		}
	}
	if count > l.HoldsPerSession {
		return errorf(CodeLimit, "session %s would hold or wait for %d names, over its limit %d", s.publicKey(), count, l.HoldsPerSession)
	}
	return nil
}

// checkQueue refuses to queue r past Waiters or WaitersPerName.
func (l *Limits) checkQueue(t *Table, r *request) *Error {
	if err := l.checkTokenWaiters(t, r.s.owner); err != nil {
		return err
	}
	if l == nil {
		return nil
	}
	if l.Waiters > 0 && t.waiting >= l.Waiters {
		return errorf(CodeLimit, "%d requests wait in the cluster, its limit", t.waiting)
	}
	if l.WaitersPerName == 0 {
		return nil
	}
	for _, sp := range r.specs {
		if n := t.nodes[sp.Name]; n != nil && n.waiting != nil && n.queue().here.size >= l.WaitersPerName {
			return errorf(CodeLimit, "%d requests wait for %q, its limit", n.queue().here.size, sp.Name)
		}
	}
	return nil
}
