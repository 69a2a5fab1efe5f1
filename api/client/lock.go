package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// maxWait is the wait asked of the server when ctx has no deadline: the
// API's upper bound; the server caps it at its own maximum long-poll.
const maxWait = 24 * time.Hour

// minRetryWait is the least time left before ctx's deadline for which a
// request that timed out on the server is replaced by a new one.
const minRetryWait = 100 * time.Millisecond

// cleanupTimeout bounds the cancel (and release) a cancelled acquire
// sends after its ctx ended.
const cleanupTimeout = 10 * time.Second

// Lock acquires name exclusively, waiting until it is granted or ctx
// ends (see the package documentation for what happens then).
func (s *Session) Lock(ctx context.Context, name string) (*Grant, error) {
	return s.acquire(ctx, []LockSpec{{Name: name, Mode: Write}}, acquireConfig{wait: untilCtx})
}

// RLock acquires name shared with other readers, waiting as Lock does.
func (s *Session) RLock(ctx context.Context, name string) (*Grant, error) {
	return s.acquire(ctx, []LockSpec{{Name: name, Mode: Read}}, acquireConfig{wait: untilCtx})
}

// TryLock acquires name exclusively only if it is free right now; else it
// returns an error matching ErrLocked (and ErrTimeout), whose message
// names the holders.
func (s *Session) TryLock(ctx context.Context, name string) (*Grant, error) {
	return s.acquire(ctx, []LockSpec{{Name: name, Mode: Write}}, acquireConfig{})
}

// Acquire takes locks in one request, atomically: each LockSpec names a
// lock, its mode (Write when empty) and, for a semaphore, the permits it
// takes and the name's limit (every user of the name must agree on the
// limit: else ErrLimitMismatch). With no option Acquire waits, as Lock
// does, for all of them; a Require asks for any one or a majority
// instead (never a useless subset: the Grant lists what was granted),
// Wait bounds the wait on the server (Wait(0) tries once) and HoldTTL
// makes the holds end by themselves:
//
//	s.Acquire(ctx, []client.LockSpec{{Name: "pool/gpu", Weight: 1, Limit: 4}}, client.Wait(5*time.Second))
//	s.Acquire(ctx, replicas, client.RequireMajority, client.HoldTTL(time.Minute))
func (s *Session) Acquire(ctx context.Context, locks []LockSpec, opts ...AcquireOption) (*Grant, error) {
	cfg := acquireConfig{wait: untilCtx}
	for _, o := range opts {
		o.applyAcquire(&cfg)
	}
	switch {
	case len(locks) == 0:
		return nil, errors.New("lockd acquire: no locks named")
	case cfg.holdTTLSet && cfg.holdTTL <= 0:
		return nil, fmt.Errorf("lockd acquire: hold TTL %v is not positive", cfg.holdTTL)
	}
	return s.acquire(ctx, locks, cfg)
}

// AcquireOption adjusts an Acquire: a Require (RequireAll, the default,
// RequireAny or RequireMajority), Wait or HoldTTL.
type AcquireOption interface {
	applyAcquire(*acquireConfig)
}

// acquireConfig is what an acquire asks for beyond its locks.
type acquireConfig struct {
	require    Require       // "": all
	wait       time.Duration // the server-side wait of one request, or untilCtx
	holdTTL    time.Duration // 0: the holds last until released
	holdTTLSet bool
}

func (r Require) applyAcquire(c *acquireConfig) { c.require = r }

// acquireOption is an AcquireOption made of a function.
type acquireOption func(*acquireConfig)

func (f acquireOption) applyAcquire(c *acquireConfig) { f(c) }

// Wait bounds the wait on the server: the request waits at most d (capped
// by the server's maximum wait) and then fails with ErrTimeout, a definite
// answer — nothing is held — unlike an ended ctx, after which the client
// has to cancel the request. Wait(0) tries once, as TryLock does. ctx
// still bounds the whole call, failover included. Without Wait, Acquire
// waits until ctx ends, renewing requests that the server ends sooner.
func Wait(d time.Duration) AcquireOption {
	return acquireOption(func(c *acquireConfig) { c.wait = max(d, 0) })
}

// HoldTTL makes the holds end by themselves: the cluster releases each
// lock granted d (> 0) after its grant unless the session releases it
// first (the API's hold_ttl). Grant.Deadline tells until when, by this
// process's clock, the holds surely last.
func HoldTTL(d time.Duration) AcquireOption {
	return acquireOption(func(c *acquireConfig) { c.holdTTL, c.holdTTLSet = d, true })
}

// untilCtx as an acquire's wait: until ctx ends, renewing requests that
// the server ends earlier.
const untilCtx = time.Duration(-1)

// Unlock releases one hold of name (a reentrant hold counts down by one).
// ErrNotHeld when the session does not hold it.
func (s *Session) Unlock(ctx context.Context, name string) error {
	if err := s.usable(); err != nil {
		return fmt.Errorf("lockd unlock %s: %w", name, err)
	}
	body := wire.ReleaseRequest{Session: wire.SessionID(s.id), Name: name}
	for {
		err := s.c.release(ctx, body)
		if err == nil {
			s.released(name)
			return nil
		}
		if !errors.Is(err, ErrUnknownOutcome) {
			s.noteLost(err)
			if errors.Is(err, ErrNotHeld) {
				s.notHeld(name, err)
			}
			return fmt.Errorf("lockd unlock %s: %w", name, err)
		}
		// The release was sent but its answer lost. Resending could
		// count a reentrant hold down twice: look first.
		done, cerr := s.releaseApplied(ctx, name)
		if cerr != nil {
			return fmt.Errorf("lockd unlock %s: %w (checking the session: %w)", name, err, cerr)
		}
		if done {
			s.released(name)
			return nil
		}
	}
}

// releaseApplied reports whether a release of name whose outcome is
// unknown took effect, comparing the cluster's hold count with this
// client's. It errs when it cannot tell.
func (s *Session) releaseApplied(ctx context.Context, name string) (bool, error) {
	info, err := s.c.GetSession(ctx, s.id)
	if err != nil {
		s.noteLost(err)
		return false, err
	}
	s.revoked(info.Revoked)
	onServer := 0
	for _, h := range info.Held {
		if h.Name == name {
			onServer = h.Count
		}
	}
	mine := s.heldCount(name)
	switch {
	case onServer == 0:
		return true, nil
	case mine > 0 && onServer < mine:
		return true, nil
	case mine > 0 && onServer == mine:
		return false, nil // not applied: resend
	default:
		return false, fmt.Errorf("%w: %q is held %d time(s), this client counted %d", ErrUnknownOutcome, name, onServer, mine)
	}
}

// Release releases one hold of every lock g granted.
func (s *Session) Release(ctx context.Context, g *Grant) error {
	body := wire.ReleaseRequest{Session: wire.SessionID(s.id), RequestID: g.RequestID}
	err := s.c.release(ctx, body)
	for errors.Is(err, ErrUnknownOutcome) {
		// The release was sent but its answer lost. A request is
		// released once (its state says "released"), so asking for its
		// state settles the doubt; resending blindly is safe too, but
		// its not_held would not tell "released by the first send" from
		// "revoked". A state that settles nothing (unreadable, or neither
		// granted nor released) leaves the outcome unknown: the error
		// says so, and asking again would only loop.
		done, rerr := s.requestReleased(ctx, g.RequestID, err)
		if done || rerr != nil {
			err = rerr
			break
		}
		err = s.c.release(ctx, body)
	}
	if err != nil {
		s.noteLost(err)
		if errors.Is(err, ErrNotHeld) {
			for _, n := range g.Names() {
				s.notHeld(n, err)
			}
		}
		return fmt.Errorf("lockd release request %s: %w", g.RequestID, err)
	}
	s.released(g.Names()...)
	return nil
}

// requestReleased reports whether a release of request id whose outcome
// is unknown (cause) took effect: true when the request says "released";
// false and no error when it is still granted (resend); cause, with what
// the cluster said, when it is neither or cannot be read.
func (s *Session) requestReleased(ctx context.Context, id string, cause error) (bool, error) {
	var st wire.Request
	err := s.c.do(ctx, call{method: "GET", path: "/v1/requests/" + url.PathEscape(id),
		query: url.Values{"session": {s.id}}, out: &st})
	switch {
	case err != nil:
		return false, fmt.Errorf("%w (reading the request: %w)", cause, err)
	case st.Status == "released":
		return true, nil
	case st.Status == "granted":
		return false, nil
	}
	return false, fmt.Errorf("%w (the request is %q)", cause, st.Status)
}

// Surrender hands a held lock to the sessions waiting for it; this session
// queues again behind them and gets it back, with a new token, when they
// are done. It reports whether anyone was waiting (false: "kept").
func (s *Session) Surrender(ctx context.Context, name string) (surrendered bool, err error) {
	var ans struct {
		Status string `json:"status"`
	}
	err = s.c.do(ctx, call{method: "POST", path: "/v1/surrender", body: wire.ReleaseRequest{Session: wire.SessionID(s.id), Name: name},
		out: &ans, retry: retryUnsent})
	if err != nil {
		s.noteLost(err)
		return false, fmt.Errorf("lockd surrender %s: %w", name, err)
	}
	if ans.Status == "surrendered" {
		s.forget(name) // the re-grant comes without this client asking
	}
	return ans.Status == "surrendered", nil
}

// noteLost ends the session when a call says it is gone.
func (s *Session) noteLost(err error) {
	if errors.Is(err, ErrSessionNotFound) {
		s.end(fmt.Errorf("lockd session %s: %w", s.id, err))
	}
}

// acquire runs acquires until one is granted, fails for good, or ctx
// ends.
func (s *Session) acquire(ctx context.Context, locks []LockSpec, cfg acquireConfig) (*Grant, error) {
	what := locks[0].Name
	if len(locks) > 1 {
		what = fmt.Sprintf("%s (+%d more)", what, len(locks)-1)
	}
	if err := s.usable(); err != nil {
		return nil, fmt.Errorf("lockd acquire %s: %w", what, err)
	}
	wait, holdTTL := cfg.wait, cfg.holdTTL
	renew := wait == untilCtx
	for {
		if renew {
			wait = waitFor(ctx)
		}
		body := wire.AcquireRequest{Session: wire.SessionID(s.id), RequestID: newRequestID(), Locks: locks,
			Require: string(cfg.require), Wait: Duration(wait), HoldTTL: Duration(holdTTL)}
		// The leader stamps the grant no earlier than now, and table time
		// never runs faster than real time (docs/architecture.md): the
		// holds last at least until sent + holdTTL.
		sent := time.Now()
		g, err := s.request(ctx, body)
		if err == nil {
			if holdTTL > 0 {
				g.deadline = sent.Add(holdTTL)
			}
			s.granted(g)
			return g, nil
		}
		s.noteLost(err)
		// The server's wait is capped below ours: the request ended, so a
		// new one (new id) cannot double-acquire. Keep going while ctx
		// allows.
		if renew && errors.Is(err, ErrTimeout) && ctx.Err() == nil && waitFor(ctx) > minRetryWait {
			continue
		}
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return nil, fmt.Errorf("lockd acquire %s: %w", what, err)
	}
}

// waitFor is the wait to ask for: until ctx's deadline, or the maximum.
func waitFor(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return maxWait
	}
	return max(time.Until(d), 0)
}

// postResult is the outcome of one POST /v1/acquire.
type postResult struct {
	st  wire.Request
	err error
}

// request sees one request (one request_id) to its end: it posts it
// once, re-attaches by id when the answer is lost, and cancels it on the
// server when ctx ends.
func (s *Session) request(ctx context.Context, body wire.AcquireRequest) (*Grant, error) {
	id := body.RequestID
	for {
		// The POST runs detached from ctx: when ctx ends, the cancel
		// below makes the server answer it, and that answer (granted or
		// cancelled) is what tells whether the lock is held.
		pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
		results := make(chan postResult, 1)
		go func() {
			var r postResult
			r.err = s.c.do(pctx, call{method: "POST", path: "/v1/acquire", body: body, out: &r.st,
				retry: retryNever, wait: time.Duration(body.Wait)})
			results <- r
		}()
		var r postResult
		select {
		case r = <-results:
			pcancel()
		case <-ctx.Done():
			err := s.cancel(ctx, id, results)
			pcancel()
			return nil, err
		}
		if r.err == nil {
			return grantOf(&r.st), nil
		}
		if code := codeOf(r.err); code != "" && !retryable(code) {
			return nil, r.err // a definite answer
		}
		// Unknown outcome (node gone, no leader, diverged): find the request
		// wherever the cluster is now.
		g, err := s.reattach(ctx, id, time.Duration(body.Wait))
		if errors.Is(err, ErrRequestNotFound) {
			// The cluster never saw it: send the same request again (same
			// id, so a late first copy cannot double it).
			continue
		}
		return g, err
	}
}

// reattach long-polls GET /v1/requests/{id} until the request ends or
// ctx does. It names the session: a request id is the session's own, and
// another session of the same token may use the same one.
func (s *Session) reattach(ctx context.Context, id string, wait time.Duration) (*Grant, error) {
	for {
		poll := min(wait, waitFor(ctx))
		q := url.Values{"wait": {poll.String()}, "session": {s.id}}
		var st wire.Request
		err := s.c.do(ctx, call{method: "GET", path: "/v1/requests/" + url.PathEscape(id), query: q, out: &st, wait: poll})
		switch {
		case ctx.Err() != nil:
			return nil, s.cancel(ctx, id, nil)
		case err != nil:
			return nil, err
		}
		if g, err, final := outcome(&st); final {
			return g, err
		}
		if wait == 0 {
			// A try (wait 0) cannot stay pending; a pending answer means
			// the read raced the proposal: ask again.
			if err := sleep(ctx, 20*time.Millisecond); err != nil {
				return nil, s.cancel(ctx, id, nil)
			}
		}
	}
}

// outcome turns a request's state into a grant or an error; final is
// false while it is pending.
func outcome(st *wire.Request) (g *Grant, err error, final bool) {
	switch st.Status {
	case "pending":
		return nil, nil, false
	case "granted":
		return grantOf(st), nil, true
	default: // timeout, deadlock, cancelled: the codes match the statuses
		return nil, &Error{Code: st.Status, Message: fmt.Sprintf("request %s ended %s", st.RequestID, st.Status)}, true
	}
}

// cancel withdraws request id after ctx ended and returns ctx's error.
// If the cluster says it was granted meanwhile, the grant is released
// first: the caller never learns of it, so nobody else would. posted,
// when not nil, carries the answer of the POST still in flight, which
// ends once the cancel is applied; until then a request_not_found from
// the cancel only means the acquire has not been applied yet.
func (s *Session) cancel(ctx context.Context, id string, posted <-chan postResult) error {
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer ccancel()
	cause := ctx.Err()
	for {
		var st wire.Request
		q := url.Values{"session": {s.id}}
		err := s.c.do(cctx, call{method: "DELETE", path: "/v1/requests/" + url.PathEscape(id), query: q, out: &st})
		switch {
		case err == nil && st.Status == "granted":
			return s.releaseLate(cctx, cause, grantOf(&st))
		case err == nil:
			return cause // cancelled, or ended otherwise: nothing is held
		case errors.Is(err, ErrSessionNotFound):
			s.noteLost(err)
			return cause
		case !errors.Is(err, ErrRequestNotFound):
			return errors.Join(cause, fmt.Errorf("cancelling request %s: %w", id, err))
		case posted == nil:
			return cause // it existed and is forgotten: it ended long ago
		}
		// Not applied yet: wait a little for the POST to answer.
		select {
		case r := <-posted:
			if r.err == nil {
				return s.releaseLate(cctx, cause, grantOf(&r.st))
			}
			if code := codeOf(r.err); code != "" && !retryable(code) {
				return cause
			}
			posted = nil // unknown: one more cancel decides
			if err := sleep(cctx, 50*time.Millisecond); err != nil {
				return errors.Join(cause, fmt.Errorf("cancelling request %s: %w", id, err))
			}
		case <-time.After(50 * time.Millisecond):
		case <-cctx.Done():
			return errors.Join(cause, fmt.Errorf("cancelling request %s: %w", id, cctx.Err()))
		}
	}
}

// releaseLate releases a grant that came after its ctx ended.
func (s *Session) releaseLate(ctx context.Context, cause error, g *Grant) error {
	s.granted(g)
	if err := s.Release(ctx, g); err != nil {
		return errors.Join(cause, fmt.Errorf("releasing late grant %s: %w", g.RequestID, err))
	}
	return cause
}

// newRequestID returns a fresh idempotency key: "c-" and 26 base32
// characters of crypto/rand (128 bits), so ids from different clients
// never collide.
func newRequestID() string { return "c-" + rand.Text() }
