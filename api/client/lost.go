package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Losing a lock without giving it back: an operator revoked it (POST
// /v1/revoke), the session ended (expired, closed, or its keepalives
// refused), or the cluster answered not_held to Unlock or Release. A
// grant's Lost channel is closed then, and the session's OnLost callback
// runs, so that the holder stops touching what the lock protects.
// Revocations reach the client in the answer of its next keepalive, at
// most TTL/3 after the revoke while keepalives succeed.

// ErrRevoked is a grant's LostErr when an operator revoked one of its
// locks.
var ErrRevoked = errors.New("lockd: lock revoked by an operator")

// WithOnLost calls fn, on a goroutine of its own, for every lock of a
// live grant this session loses without releasing it: revoked (err
// matches ErrRevoked), gone with the session (err is the session's Err),
// or reported not held by the cluster (err matches ErrNotHeld). fn runs
// at most once per lock of a grant; Grant.Lost is closed before it runs.
func WithOnLost(fn func(name string, token uint64, err error)) SessionOption {
	return func(c *sessionConfig) { c.onLost = fn }
}

// lostState is a grant's loss notification; created with the grant.
type lostState struct {
	once sync.Once
	ch   chan struct{}
	err  error // set before ch is closed
}

// Lost returns a channel closed when one of the grant's locks is lost
// without this client releasing it: revoked by an operator, or its
// session ended. LostErr then says why. A grant released normally is
// never lost.
func (g *Grant) Lost() <-chan struct{} { return g.lostState().ch }

// LostErr is nil until Lost is closed; then ErrRevoked (wrapped, naming
// the lock) or the session's error.
func (g *Grant) LostErr() error {
	st := g.lostState()
	select {
	case <-st.ch:
		return st.err
	default:
		return nil
	}
}

func (g *Grant) lostState() *lostState {
	g.lostOnce.Do(func() { g.lost = &lostState{ch: make(chan struct{})} })
	return g.lost
}

func (st *lostState) mark(err error) bool {
	marked := false
	st.once.Do(func() {
		st.err, marked = err, true
		close(st.ch)
	})
	return marked
}

// granted counts the holds of g, for Unlock's after-the-fact checks, and
// tracks g for loss notifications. A grant whose answer came after the
// keepalive that reported one of its locks revoked, or after the session
// ended, is lost at once.
func (s *Session) granted(g *Grant) {
	g.lostState()
	s.mu.Lock()
	var gone []Revocation
	for _, l := range g.Locks {
		if i := slices.IndexFunc(s.recent, revokes(l)); i >= 0 {
			gone = append(gone, s.recent[i])
			continue // revoked already: not held
		}
		s.holds[l.Name]++
	}
	s.grants = append(s.grants, g)
	s.mu.Unlock()
	for _, rv := range gone {
		s.loseWhere(revokedErr(rv), lostTo(rv))
	}
	if err := s.usable(); err != nil {
		s.loseAll(err) // end ran before g was tracked
	}
}

// untrack forgets the grants released or lost.
func (s *Session) untrack(drop func(g *Grant) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants = slices.DeleteFunc(s.grants, drop)
}

// revokedLock reports whether rv revoked l (same name and token).
func revokedLock(rv Revocation, l GrantedLock) bool { return l.Name == rv.Name && l.Token == rv.Token }

// revokedErr is the error of a grant lost to rv.
func revokedErr(rv Revocation) error {
	return fmt.Errorf("%w: %s (token %d, revoked at index %d)", ErrRevoked, rv.Name, rv.Token, rv.Index)
}

// revokes returns a matcher of the revocations of l.
func revokes(l GrantedLock) func(Revocation) bool {
	return func(rv Revocation) bool { return revokedLock(rv, l) }
}

// lostTo returns a matcher of the locks rv revoked.
func lostTo(rv Revocation) func(GrantedLock) bool {
	return func(l GrantedLock) bool { return revokedLock(rv, l) }
}

// recentRevocations is how many revocations a session remembers: to skip
// those every later keepalive repeats (the cluster lists a session's
// latest 16) and to catch a grant whose answer arrives after its lock's
// revocation.
const recentRevocations = 64

// revoked handles a keepalive's list of revocations: each grant holding a
// revoked lock (same name and token) is lost, and its holds no longer
// count. Revocations seen before are skipped.
func (s *Session) revoked(list []Revocation) {
	for _, rv := range list {
		if s.seen(rv) {
			continue
		}
		s.lostHold(rv.Name, rv.Token, revokedErr(rv))
	}
}

// lostHold handles the word that the session's hold on name with token is
// gone (revoked, or refused as not held with that token): the grants that
// took it are lost with err, and their holds no longer count. A grant of
// name under another token (the name won again) is left alone.
func (s *Session) lostHold(name string, token uint64, err error) {
	lost := s.loseWhere(err, func(l GrantedLock) bool { return l.Name == name && l.Token == token })
	s.mu.Lock()
	defer s.mu.Unlock()
	for range lost {
		s.countDown(name)
	}
}

// seen reports whether rv was handled before, and remembers it.
func (s *Session) seen(rv Revocation) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Contains(s.recent, rv) {
		return true
	}
	s.recent = append(s.recent, rv)
	if n := len(s.recent) - recentRevocations; n > 0 {
		s.recent = slices.Delete(s.recent, 0, n)
	}
	return false
}

// notHeld handles the cluster's word (not_held) that the session does not
// hold name: the grants this client believed hold it are lost.
func (s *Session) notHeld(name string, err error) {
	s.forget(name)
	s.loseWhere(fmt.Errorf("lockd session %s does not hold %s: %w", s.id, name, err),
		func(l GrantedLock) bool { return l.Name == name })
}

// loseWhere marks lost every tracked grant with a lock that match
// accepts, calls OnLost for those locks, and returns the grants.
func (s *Session) loseWhere(err error, match func(GrantedLock) bool) []*Grant {
	var lost []*Grant
	s.untrack(func(g *Grant) bool {
		if slices.ContainsFunc(g.Locks, match) {
			lost = append(lost, g)
			return true
		}
		return false
	})
	for _, g := range lost {
		if !g.lostState().mark(err) || s.onLost == nil {
			continue
		}
		for _, l := range g.Locks {
			if match(l) {
				go s.onLost(l.Name, l.Token, err)
			}
		}
	}
	return lost
}

// loseAll marks every live grant lost with the session's end.
func (s *Session) loseAll(err error) {
	s.loseWhere(err, func(GrantedLock) bool { return true })
}

// Revoke releases every hold on name at once, whoever holds it (a token
// with admin on the name). The holders' tokens stop being valid, waiters
// are granted in order, and each holder's client learns it on its next
// keepalive (Grant.Lost).
func (c *Client) Revoke(ctx context.Context, name string) ([]RevokedHold, error) {
	var out struct {
		Revoked []RevokedHold `json:"revoked"`
	}
	// Not repeated after an unknown outcome: a repeat could revoke a grant
	// made meanwhile.
	err := c.do(ctx, call{method: "POST", path: "/v1/revoke", body: map[string]string{"name": name}, out: &out, retry: retryUnsent})
	if err != nil {
		return nil, fmt.Errorf("lockd revoke %s: %w", name, err)
	}
	return out.Revoked, nil
}
