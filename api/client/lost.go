package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Losing a lock without giving it back: an operator revoked it (POST
// /v1/revoke), or the session ended. A grant's Lost channel is closed
// then, and the session's OnLost callback runs, so that the holder stops
// touching what the lock protects. Revocations reach the client in the
// answer of its next keepalive (every TTL/3).

// ErrRevoked is a grant's LostErr when an operator revoked one of its
// locks.
var ErrRevoked = errors.New("lockd: lock revoked by an operator")

// WithOnLost calls fn, on a goroutine of the client, for every lock of a
// live grant this session loses without releasing it: revoked (err
// matches ErrRevoked) or gone with the session (err is the session's Err).
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

// track remembers a live grant, for loss notifications.
func (s *Session) track(g *Grant) {
	g.lostState()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants = append(s.grants, g)
}

// untrack forgets the grants released or lost.
func (s *Session) untrack(drop func(g *Grant) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants = slices.DeleteFunc(s.grants, drop)
}

// revocation is one lock revoked from the session (keepalive answers and
// GET /v1/sessions/{id}).
type revocation struct {
	Name  string `json:"name"`
	Token uint64 `json:"token"`
	Index uint64 `json:"index"`
}

// revoked handles a keepalive's list of revocations: each grant holding a
// revoked lock (same name and token) is lost. A list is the latest few,
// so one seen before is skipped.
func (s *Session) revoked(list []revocation) {
	for _, rv := range list {
		s.mu.Lock()
		seen := rv.Index <= s.lastRevoke
		if !seen {
			s.lastRevoke = max(s.lastRevoke, rv.Index)
		}
		s.mu.Unlock()
		if seen {
			continue
		}
		s.forget(rv.Name)
		err := fmt.Errorf("%w: %s (token %d, revoked at index %d)", ErrRevoked, rv.Name, rv.Token, rv.Index)
		s.loseWhere(err, func(l GrantedLock) bool { return l.Name == rv.Name && l.Token == rv.Token })
	}
}

// loseWhere marks lost every tracked grant with a lock that match
// accepts, and calls OnLost for those locks.
func (s *Session) loseWhere(err error, match func(GrantedLock) bool) {
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

// RevokedHold is one hold a revoke released.
type RevokedHold struct {
	Session string `json:"session"`
	Name    string `json:"name"`
	Token   uint64 `json:"token"`
}
