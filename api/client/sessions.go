package client

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// Calls on a session by its id, for a session that no Session of this
// client runs: one another process keeps alive, or one left to expire
// (lockctl's session commands and release are these).

// ClosedSession is what deleting a session ended: the locks it released
// and the requests it cancelled.
type ClosedSession = wire.CloseSessionResponse

// CreateSession makes a session with the given TTL (1s–24h) that this
// client does not keep alive, unlike NewSession: it expires after its TTL,
// releasing what it holds, unless something sends its keepalives (POST
// /v1/sessions/{id}/keepalive). Of the options, those that configure the
// session in the cluster count (name, deadlock policy, ordering, lock
// delay); those of keepalives do not.
func (c *Client) CreateSession(ctx context.Context, ttl time.Duration, opts ...SessionOption) (*SessionInfo, error) {
	cfg := sessionConfig{body: wire.CreateSessionRequest{TTL: (*Duration)(&ttl)}}
	for _, o := range opts {
		o(&cfg)
	}
	info, err := c.createSession(ctx, cfg.body)
	if err != nil {
		return nil, fmt.Errorf("lockd create session: %w", err)
	}
	return info, nil
}

// createSession is POST /v1/sessions.
func (c *Client) createSession(ctx context.Context, body wire.CreateSessionRequest) (*SessionInfo, error) {
	var info SessionInfo
	// Safe to repeat: a session created by an attempt whose answer was
	// lost holds nothing and expires after its TTL.
	if err := c.do(ctx, call{method: "POST", path: "/v1/sessions", body: body, out: &info}); err != nil {
		return nil, err
	}
	return &info, nil
}

// DeleteSession ends session id, as its Session's Close would: it
// releases everything the session holds and cancels its waiting requests.
// An error matching ErrSessionNotFound when there is no such session
// (any more: a delete whose answer was lost is sent again, and the second
// finds none).
func (c *Client) DeleteSession(ctx context.Context, id string) (*ClosedSession, error) {
	closed, err := c.deleteSession(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("lockd delete session %s: %w", id, err)
	}
	return closed, nil
}

// deleteSession is DELETE /v1/sessions/{id}.
func (c *Client) deleteSession(ctx context.Context, id string) (*ClosedSession, error) {
	var out ClosedSession
	if err := c.do(ctx, call{method: "DELETE", path: "/v1/sessions/" + url.PathEscape(id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Unlock releases one hold of name by session (a reentrant hold counts
// down by one); a Session releases its own with Session.Unlock, which
// also keeps its Grants' loss notices right. ErrNotHeld when the session
// does not hold name, ErrSessionNotFound when there is no such session.
// A release is not idempotent: after an unknown outcome the error wraps
// ErrUnknownOutcome, and GetSession tells what the session still holds.
func (c *Client) Unlock(ctx context.Context, session, name string) error {
	if err := c.release(ctx, wire.ReleaseRequest{Session: wire.SessionID(session), Name: name}); err != nil {
		return fmt.Errorf("lockd unlock %s of session %s: %w", name, session, err)
	}
	return nil
}

// release is POST /v1/release. It is not idempotent (a reentrant hold
// would count down twice): it is sent again only when nothing was done.
func (c *Client) release(ctx context.Context, body wire.ReleaseRequest) error {
	return c.do(ctx, call{method: "POST", path: "/v1/release", body: body, out: &wire.ReleaseResponse{}, retry: retryUnsent})
}
