package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// OnDeadlock says what happens to a session chosen as a deadlock victim.
type OnDeadlock string

// Deadlock policies.
const (
	// OnDeadlockAbort fails the victim's waiting request with ErrDeadlock.
	OnDeadlockAbort OnDeadlock = "abort"
	// OnDeadlockSurrender makes the victim hand over what it holds and
	// queue again.
	OnDeadlockSurrender OnDeadlock = "surrender"
)

// SessionOption configures NewSession.
type SessionOption func(*sessionConfig)

type sessionConfig struct {
	body   wire.CreateSessionRequest
	margin time.Duration
	onLost func(name string, token uint64, err error)
}

// WithSessionName names the session (shown by lockctl and the dashboard).
func WithSessionName(name string) SessionOption {
	return func(c *sessionConfig) { c.body.Name = name }
}

// WithOnDeadlock sets the session's deadlock policy (default abort).
func WithOnDeadlock(p OnDeadlock) SessionOption {
	return func(c *sessionConfig) { c.body.OnDeadlock = string(p) }
}

// WithOrdered makes the session ordered: it may only ask for names that
// sort after every name it holds or waits for (deadlock-free by design).
func WithOrdered(ordered bool) SessionOption {
	return func(c *sessionConfig) { c.body.Ordered = ordered }
}

// WithLockDelay keeps the session's locks blocked this long after it
// expires, so a holder that lost its session has time to notice.
func WithLockDelay(d time.Duration) SessionOption {
	return func(c *sessionConfig) { c.body.LockDelay = Duration(d) }
}

// WithSafetyMargin sets how long before the TTL runs out, counted from
// the last successful keepalive, the session is reported lost. The
// default is TTL/5, at least 200ms: the server counts the TTL from when
// it received the keepalive, and clocks run at slightly different rates.
func WithSafetyMargin(d time.Duration) SessionOption {
	return func(c *sessionConfig) { c.margin = d }
}

// Session is a lockd session: it owns locks, and lives while keepalives
// arrive within its TTL. NewSession starts a goroutine that sends them
// every TTL/3, retrying on other nodes when one fails, so a leader
// election the session survives goes unnoticed. Done is closed when the
// session is lost (or closed); from then on its locks must be treated as
// gone.
type Session struct {
	c      *Client
	id     string
	ttl    time.Duration
	margin time.Duration

	done     chan struct{} // closed by end
	stop     chan struct{} // closed by Close: the keepalive loop returns
	loopDone chan struct{} // closed when the keepalive loop has returned
	endOnce  sync.Once
	stopOnce sync.Once

	mu          sync.Mutex
	err         error          // why done is closed
	holds       map[string]int // this client's grants per name, for Unlock's checks
	pausedUntil time.Time      // test hook: no keepalives until then
	grants      []*Grant       // live grants, for loss notifications (lost.go)
	recent      []Revocation   // the latest revocations handled, oldest first
	onLost      func(name string, token uint64, err error)
}

// NewSession creates a session with the given TTL (1s–24h) and starts its
// keepalives.
func (c *Client) NewSession(ctx context.Context, ttl time.Duration, opts ...SessionOption) (*Session, error) {
	cfg := sessionConfig{body: wire.CreateSessionRequest{TTL: (*Duration)(&ttl)}}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.margin <= 0 {
		cfg.margin = max(ttl/5, 200*time.Millisecond)
	}
	if cfg.margin >= ttl-ttl/3 {
		return nil, fmt.Errorf("lockd new session: safety margin %v leaves no time for a keepalive within ttl %v", cfg.margin, ttl)
	}
	sent := time.Now()
	info, err := c.createSession(ctx, cfg.body)
	if err != nil {
		return nil, fmt.Errorf("lockd new session: %w", err)
	}
	s := &Session{c: c, id: info.ID, ttl: time.Duration(info.TTL), margin: cfg.margin,
		done: make(chan struct{}), stop: make(chan struct{}), loopDone: make(chan struct{}),
		holds: map[string]int{}, onLost: cfg.onLost}
	if s.ttl <= 0 {
		s.ttl = ttl
	}
	go s.keepalives(sent)
	return s, nil
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// TTL returns the session's TTL.
func (s *Session) TTL() time.Duration { return s.ttl }

// Done returns a channel closed when the session is lost or closed; Err
// then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session lives; after Done is closed, an error
// matching ErrSessionNotFound (the cluster said the session is gone),
// ErrKeepaliveExpired (no keepalive succeeded for longer than the TTL
// minus the safety margin; it wraps the cluster's last answer, such as a
// no_leader *Error with QuorumLost, when a node gave one), ErrUnauthorized
// or ErrForbidden (the cluster refused a keepalive: the token was
// deleted, or does not own the session, so nothing keeps it alive) or
// ErrSessionClosed (Close was called).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// end closes Done with err (the first reason wins).
func (s *Session) end(err error) {
	s.endOnce.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
		if !errors.Is(err, ErrSessionClosed) {
			s.c.log.Warn("lockd client: session lost", "session", s.id, "err", err)
		}
		s.loseAll(err)
	})
}

// usable returns Err if the session has ended.
func (s *Session) usable() error {
	select {
	case <-s.done:
		return s.Err()
	default:
		return nil
	}
}

// keepalives runs until Close or loss. A keepalive that fails is retried
// (the transport fails over to other nodes) until TTL minus the margin
// has passed since the last one that succeeded: only then, or when the
// cluster says session_not_found, is the session lost.
func (s *Session) keepalives(lastOK time.Time) {
	defer close(s.loopDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	interval := s.ttl / 3
	retryEvery := min(interval, 200*time.Millisecond)
	// answer is the last answer a node gave since the last success (a 503
	// that says why there is no leader): it outlives later failures that
	// say only that some node did not answer.
	var lastErr, answer error
	delay := interval
	for {
		if sleep(ctx, delay) != nil {
			return
		}
		now := time.Now()
		if s.paused(now) {
			lastOK, delay = now, min(interval, 50*time.Millisecond)
			continue
		}
		deadline := lastOK.Add(s.ttl - s.margin)
		if !now.Before(deadline) {
			s.end(s.expired(now.Sub(lastOK), answer, lastErr))
			return
		}
		kctx, kcancel := context.WithDeadline(ctx, deadline)
		// Several attempts fit before the deadline: a node that hangs
		// (paused, or cut off with its connections open) costs one
		// attempt, not the session.
		revoked, err := s.c.keeper.keepAlive(kctx, s.id, delay, keepaliveAttempt(s.ttl))
		kcancel()
		switch {
		case err == nil:
			lastOK, delay, lastErr, answer = now, interval, nil, nil
			s.revoked(revoked)
		case errors.Is(err, ErrSessionNotFound), errors.Is(err, ErrUnauthorized), errors.Is(err, ErrForbidden):
			s.end(fmt.Errorf("lockd session %s: keepalive: %w", s.id, err))
			return
		case ctx.Err() != nil:
			return
		default:
			s.c.log.Info("lockd client: keepalive failed; retrying", "session", s.id, "err", err)
			lastErr, delay = err, retryEvery
			var ae *Error
			if errors.As(err, &ae) && ae.HTTPStatus != 0 {
				answer = err
			}
		}
	}
}

// expired is Err of a session whose keepalives ran out for since: it
// wraps ErrKeepaliveExpired and the cluster's last answer, if any (so
// that errors.As finds its *Error: no_leader, QuorumLost), before the
// last failure, which may only say that a dead node did not answer.
func (s *Session) expired(since time.Duration, answer, last error) error {
	since = since.Round(time.Millisecond)
	switch {
	case answer == nil:
		return fmt.Errorf("%w: last success %v ago (ttl %v); last error: %w", ErrKeepaliveExpired, since, s.ttl, last)
	case answer == last:
		return fmt.Errorf("%w: last success %v ago (ttl %v); the cluster's last answer: %w", ErrKeepaliveExpired,
			since, s.ttl, answer)
	}
	return fmt.Errorf("%w: last success %v ago (ttl %v); the cluster's last answer: %w; last error: %v",
		ErrKeepaliveExpired, since, s.ttl, answer, last)
}

// keepaliveAttempt bounds one keepalive attempt: a quarter of the TTL
// (at least 250ms), so that about three attempts on different nodes fit
// in TTL minus the safety margin.
func keepaliveAttempt(ttl time.Duration) time.Duration { return max(ttl/4, 250*time.Millisecond) }

// paused reports whether the test hook holds keepalives back.
func (s *Session) paused(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Before(s.pausedUntil)
}

// Close stops the keepalives and deletes the session, which releases
// everything it holds and cancels its waiting requests. Done is closed
// with ErrSessionClosed. ctx bounds the delete, retries included (without
// a deadline, RetryPolicy.MaxElapsed does: 30s by default), so a deferred
// Close should get a short one, lest an outage hold up the program's
// exit:
//
//	defer func() {
//		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
//		defer cancel()
//		s.Close(ctx)
//	}()
//
// A session already lost (Done closed: the cluster said it is gone, or no
// keepalive got through within its TTL) is not deleted: Close returns nil
// at once without a request. Its locks count as lost already, and the
// cluster expires it after its TTL (its names stay blocked for its lock
// delay, if any). Closing a session that is already gone on the server is
// not an error.
func (s *Session) Close(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.loopDone
	lost := s.usable()
	s.end(ErrSessionClosed)
	if lost != nil {
		return nil // lost, or closed before: nothing to give back
	}
	if _, err := s.c.deleteSession(ctx, s.id); err != nil && !errors.Is(err, ErrSessionNotFound) {
		return fmt.Errorf("lockd close session %s: %w", s.id, err)
	}
	return nil
}

// ---- local hold counts ---------------------------------------------------

// released counts one hold of each name down.
func (s *Session) released(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.countDown(n)
	}
	// A grant none of whose locks is held any more was given back: it can
	// no longer be lost.
	s.grants = slices.DeleteFunc(s.grants, func(g *Grant) bool {
		return !slices.ContainsFunc(g.Locks, func(l GrantedLock) bool { return s.holds[l.Name] > 0 })
	})
}

// countDown counts one hold of name down; s.mu is held.
func (s *Session) countDown(name string) {
	if s.holds[name] <= 1 {
		delete(s.holds, name)
	} else {
		s.holds[name]--
	}
}

// forget drops what this client knows of name's holds.
func (s *Session) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.holds, name)
}

func (s *Session) heldCount(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds[name]
}
