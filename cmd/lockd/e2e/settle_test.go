//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// The rules by which the e2e client sends a request again, from the
// contract of docs/api.md's error table:
//
//   - a 503 no_leader that says not_applied (no leader took it) may be
//     sent again as it is, and so may any read's: client.do does, until
//     the call's deadline;
//   - a write's 503 without not_applied has an unknown outcome: it may
//     have been applied, or be yet. Each write helper here settles it in
//     its own way (a request id, a linearizable read), never assuming it
//     either way;
//   - a 503 that says quorum_lost is answered as it is: no leader can be
//     elected before nodes return, and the outage tests must see it.
//
// A client made by sendOnce does none of this.

// resendable reports whether do may send a request again as it is,
// after the answer err.
func resendable(method string, err error) bool {
	ae, ok := noLeaderAnswer(err)
	return ok && (ae.NotApplied || method == http.MethodGet)
}

// unsettled reports whether err leaves a write's outcome unknown and
// worth settling: a 503 no_leader whose quorum is not lost.
func unsettled(err error) bool {
	_, ok := noLeaderAnswer(err)
	return ok
}

// noLeaderAnswer returns err's 503 no_leader unless it says the quorum
// is lost.
func noLeaderAnswer(err error) (*apiError, bool) {
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != "no_leader" || ae.QuorumLost {
		return nil, false
	}
	return ae, true
}

// pause waits a little before a request is sent again; false when ctx
// ended first.
func pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

var uniq atomic.Uint64

// unique returns a name no other call of this test binary returns.
func unique(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, uniq.Add(1))
}

// createSession opens a session, named uniquely so that an unknown
// outcome is settled by finding that name among the token's sessions: a
// second session would count against the token's limit until it expired.
func (c *client) createSession(ctx context.Context, addr, ttl string) (string, error) {
	name := unique("e2e-session")
	for {
		var s sessionView
		err := c.do(ctx, "POST", addr, "/v1/sessions", map[string]any{"ttl": ttl, "name": name}, &s)
		switch {
		case err == nil && s.ID == "":
			return "", errors.New("create session: empty id")
		case err == nil:
			return s.ID, nil
		case c.once || !unsettled(err):
			return "", err
		}
		id, lerr := c.sessionNamed(ctx, addr, name)
		switch {
		case lerr != nil:
			return "", fmt.Errorf("create session: %w; settling it: %w", err, lerr)
		case id != "":
			return id, nil // the first attempt was applied
		}
		// Not applied as of a linearizable read. Only a first attempt
		// still in flight at the same leader could yet be; it would leave
		// an orphan session, which expires after its TTL.
	}
}

// sessionNamed returns the id of the caller's session called name, ""
// if there is none (linearizable read).
func (c *client) sessionNamed(ctx context.Context, addr, name string) (string, error) {
	var list []sessionView
	if err := c.do(ctx, "GET", addr, "/v1/sessions?limit=10000", nil, &list); err != nil {
		return "", err
	}
	for _, s := range list {
		if s.Name == name {
			return s.ID, nil
		}
	}
	return "", nil
}

// acquire asks for one write lock; wait is a Go duration ("" = try once).
// It always sends a request id (requestID, or a unique one) so that a 503
// is settled by sending the same request again: it is idempotent, and
// answers the request's outcome (docs/api.md).
func (c *client) acquire(ctx context.Context, addr, session, requestID, name, wait string) (*acquireView, error) {
	if requestID == "" {
		requestID = unique("e2e-acquire")
	}
	body := map[string]any{"session": session, "request_id": requestID,
		"locks": []map[string]any{{"name": name, "mode": "write"}}}
	if wait != "" {
		body["wait"] = wait
	}
	var a acquireView
	for {
		err := c.do(ctx, "POST", addr, "/v1/acquire", body, &a)
		if err == nil {
			break
		}
		if c.once || !unsettled(err) || !pause(ctx) {
			return nil, err
		}
	}
	if a.Status != "granted" {
		return nil, fmt.Errorf("acquire %s: 200 with status %q", name, a.Status)
	}
	return &a, nil
}

// release releases one hold of name. An unknown outcome is settled by a
// linearizable read of the lock, not by releasing again blindly (a
// second release would count a reentrant hold down twice): released if
// session no longer holds it; if it holds it once, the release was not
// applied (the read followed the leader that would have applied it, or
// one still in flight is ahead of a new one in the same leader's log, so
// that the new one answers not_held). A hold counted more than once
// cannot be settled this way: every test releases single holds.
func (c *client) release(ctx context.Context, addr, session, name string) error {
	resent := false
	for {
		var r struct {
			Released []struct{ Name string } `json:"released"`
		}
		err := c.do(ctx, "POST", addr, "/v1/release", map[string]any{"session": session, "name": name}, &r)
		switch {
		case resent && errCode(err) == "not_held":
			return nil // an earlier attempt was applied
		case c.once || !unsettled(err):
			return err
		}
		n, lerr := c.holds(ctx, addr, session, name)
		switch {
		case lerr != nil:
			return fmt.Errorf("release %s: %w; settling it: %w", name, err, lerr)
		case n == 0:
			return nil // applied
		case n > 1:
			return fmt.Errorf("release %s: %w; held %d times: cannot tell whether one was released", name, err, n)
		}
		resent = true
	}
}

// holds counts session's holds of name (linearizable read).
func (c *client) holds(ctx context.Context, addr, session, name string) (int, error) {
	l, err := c.getLock(ctx, addr, name, false)
	if errCode(err) == "lock_not_found" {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, h := range l.Holders {
		if h.Session == session {
			n += h.Count
		}
	}
	return n, nil
}

// bootstrapACL makes the cluster's management token through addr and
// returns its secret. A bootstrap whose outcome is unknown is sent again:
// if the first was applied, the second is refused, and the secret (shown
// once) is lost — an error no test can settle, so it says so.
func (c *client) bootstrapACL(ctx context.Context, addr string) (string, error) {
	for resent := false; ; resent = true {
		var tok tokenView
		err := c.do(ctx, "POST", addr, "/v1/acl/bootstrap", nil, &tok)
		switch {
		case err == nil && tok.Secret == "":
			return "", errors.New("bootstrap: no secret in the answer")
		case err == nil:
			return tok.Secret, nil
		case resent && errCode(err) == "forbidden":
			return "", fmt.Errorf("bootstrap: an attempt whose outcome was unknown was applied, and its secret is lost: %w", err)
		case c.once || !unsettled(err) || !pause(ctx):
			return "", fmt.Errorf("bootstrap: %w", err)
		}
	}
}

// createToken creates an ACL token (body as POST /v1/acl/tokens takes
// it). One whose outcome is unknown is created again: if the first was
// applied, nobody saw its secret, so it is never used.
func (c *client) createToken(ctx context.Context, addr string, body map[string]any) (tokenView, error) {
	for {
		var tok tokenView
		err := c.do(ctx, "POST", addr, "/v1/acl/tokens", body, &tok)
		if err == nil || c.once || !unsettled(err) || !pause(ctx) {
			return tok, err
		}
	}
}

// deleteToken deletes an ACL token. One whose outcome is unknown is sent
// again: token_not_found then says the first was applied.
func (c *client) deleteToken(ctx context.Context, addr, id string) error {
	for resent := false; ; resent = true {
		err := c.do(ctx, "DELETE", addr, "/v1/acl/tokens/"+id, nil, nil)
		switch {
		case resent && errCode(err) == "token_not_found":
			return nil
		case err == nil || c.once || !unsettled(err) || !pause(ctx):
			return err
		}
	}
}
