package client

import (
	"context"
	"net/url"
	"time"
)

// PauseKeepalives is a test hook: the session sends no keepalive for d,
// and does not count that time against its TTL, so that the server
// expires it while the client still believes it alive.
func (s *Session) PauseKeepalives(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pausedUntil = time.Now().Add(d)
}

// SessionByID is a test hook: a Session of c for someone's session id,
// without keepalives, to act through a session c did not create.
func (c *Client) SessionByID(id string) *Session {
	s := &Session{c: c, id: id, ttl: 10 * time.Second, done: make(chan struct{}), stop: make(chan struct{}),
		loopDone: make(chan struct{}), holds: map[string]int{}}
	close(s.loopDone)
	return s
}

// KeepAliveOnce is a test hook: one keepalive of s, its error as is.
func (s *Session) KeepAliveOnce(ctx context.Context) error {
	return s.c.do(ctx, call{method: "POST", path: "/v1/sessions/" + url.PathEscape(s.id) + "/keepalive"})
}

// Sentinel is the sentinel error of an API code; nil for a code the
// client does not know.
func Sentinel(code string) error {
	if s, ok := sentinels[code]; ok {
		return s
	}
	return nil
}

// KeepAliveTogether is a test hook: the keepalives of sessions ids sent
// as the keeper sends those that fall due together, and each one's error.
func (c *Client) KeepAliveTogether(ctx context.Context, ids ...string) []error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	reqs := make([]*keepReq, len(ids))
	for i, id := range ids {
		reqs[i] = &keepReq{id: id, attempt: time.Second, deadline: deadline, done: make(chan keepResult, 1)}
	}
	c.keeper.send(newFlight(reqs), reqs)
	errs := make([]error, len(ids))
	for i, r := range reqs {
		errs[i] = (<-r.done).err
	}
	return errs
}

// KeepAliveCalls is a test hook: how many calls the keeper is making.
func (c *Client) KeepAliveCalls() int { return int(c.keeper.calls.Load()) }
