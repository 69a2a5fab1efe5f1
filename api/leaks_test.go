package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

// A timeout says who holds the name without naming another token's
// session (a management token sees the id); a token name refuses the
// characters a lock name refuses.
func TestTimeoutDoesNotNameAnotherTokensSession(t *testing.T) {
	n, root, jobs, other := twoTokens(t)
	for _, name := range []string{"evil\u202ename", "bell\a", "sep\u2028"} {
		n.deniedAs(root.Secret, http.StatusBadRequest, "invalid_request", "POST", "/v1/acl/tokens",
			map[string]any{"name": name, "rules": []map[string]string{{"prefix": "jobs/", "access": "write"}}})
	}
	held := n.sessionAs(jobs.Secret)
	n.as(jobs.Secret, http.StatusOK, "POST", "/v1/acquire",
		map[string]any{"session": held, "locks": []map[string]any{{"name": "jobs/t"}}}, nil)
	cases := []struct {
		who    string
		secret string
		named  bool
	}{{"another token", other.Secret, false}, {"the holder's token", jobs.Secret, true}, {"a management token", root.Secret, true}}
	for _, c := range cases {
		r := n.call(c.secret, "POST", "/v1/acquire",
			map[string]any{"session": n.sessionAs(c.secret), "locks": []map[string]any{{"name": "jobs/t"}}, "wait": "0s"})
		body := string(r.body)
		if r.status != http.StatusConflict || !strings.Contains(body, "timeout") {
			t.Fatalf("%s: %v, want 409 timeout", c.who, r)
		}
		if named := strings.Contains(body, held); named != c.named {
			t.Errorf("%s: names the holder's session %v, want %v: %s", c.who, named, c.named, body)
		}
		if !c.named && !strings.Contains(body, "another token's session") {
			t.Errorf("%s: does not say another token's session holds it: %s", c.who, body)
		}
	}
}

// GET /v1/locks and /v1/locks/{name} show a token every holder and waiter
// of a name it may read, but the session ids of its own sessions only; a
// management token sees them all.
func TestLockViewsNameOnlyOwnSessions(t *testing.T) {
	n, root, jobs, other := twoTokens(t)
	holder, waiter := n.sessionAs(jobs.Secret), n.sessionAs(other.Secret)
	n.as(jobs.Secret, http.StatusOK, "POST", "/v1/acquire",
		map[string]any{"session": holder, "locks": []map[string]any{{"name": "jobs/t"}}}, nil)
	queued := async(func() resp {
		return n.call(other.Secret, "POST", "/v1/acquire",
			map[string]any{"session": waiter, "request_id": "w1", "locks": []map[string]any{{"name": "jobs/t"}}, "wait": "20s"})
	})
	waitFor(t, 10*time.Second, "the waiter to queue", func() bool {
		var l wire.Lock
		n.as(root.Secret, http.StatusOK, "GET", "/v1/locks/jobs/t", nil, &l)
		return len(l.Waiters) == 1
	})

	cases := []struct {
		who                string
		secret             string
		holder, waiterSeen string // the ids the view must show ("" left out)
	}{
		{"the holder's token", jobs.Secret, holder, ""},
		{"the waiter's token", other.Secret, "", waiter},
		{"a management token", root.Secret, holder, waiter},
	}
	for _, c := range cases {
		var one wire.Lock
		var list []wire.Lock
		n.as(c.secret, http.StatusOK, "GET", "/v1/locks/jobs/t", nil, &one)
		n.as(c.secret, http.StatusOK, "GET", "/v1/locks?prefix=jobs/", nil, &list)
		if len(list) != 1 {
			t.Fatalf("%s: list %+v, want the one name", c.who, list)
		}
		for view, l := range map[string]wire.Lock{"GET /v1/locks/jobs/t": one, "GET /v1/locks": list[0]} {
			if len(l.Holders) != 1 || len(l.Waiters) != 1 {
				t.Fatalf("%s, %s: %+v, want one holder and one waiter", c.who, view, l)
			}
			if got := string(l.Holders[0].Session); got != c.holder {
				t.Errorf("%s, %s: holder's session %q, want %q", c.who, view, got, c.holder)
			}
			if got := string(l.Waiters[0].Session); got != c.waiterSeen {
				t.Errorf("%s, %s: waiter's session %q, want %q", c.who, view, got, c.waiterSeen)
			}
			if l.Holders[0].Token == 0 || l.Waiters[0].RequestID != "w1" {
				t.Errorf("%s, %s: %+v, want the hold's token and the waiter's request id", c.who, view, l)
			}
		}
	}
	n.as(jobs.Secret, http.StatusOK, "DELETE", "/v1/sessions/"+holder, nil, nil)
	if r := recv(t, queued, 20*time.Second, "the waiter's grant"); r.status != http.StatusOK {
		t.Fatalf("waiter: %s, want 200 after the holder closed", r)
	}
}

// twoTokens starts a node with ACLs, bootstraps it and makes two tokens,
// "jobs" and "other", each with write on "jobs/": the root token and those two.
func twoTokens(t *testing.T) (n *testNode, root, jobs, other wire.Token) {
	n = singleNode(t, nodeOptions{api: func(c *api.Config) { c.ACL = true }})
	n.as("", http.StatusOK, "POST", "/v1/acl/bootstrap", nil, &root)
	rules := []map[string]string{{"prefix": "jobs/", "access": "write"}}
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/acl/tokens", map[string]any{"name": "jobs", "rules": rules}, &jobs)
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/acl/tokens", map[string]any{"name": "other", "rules": rules}, &other)
	return n, root, jobs, other
}

// sessionAs opens a session (TTL 30 s) with the token secret.
func (n *testNode) sessionAs(secret string) string {
	n.t.Helper()
	var s wire.Session
	n.as(secret, http.StatusCreated, "POST", "/v1/sessions", map[string]any{"ttl": "30s"}, &s)
	return string(s.ID)
}

// A revoke by a token with admin on the name answers which holds it
// ended, naming the sessions of other tokens only to a management token.
func TestRevokeNamesOnlyVisibleSessions(t *testing.T) {
	n, root, jobs, _ := twoTokens(t)
	var adm wire.Token
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/acl/tokens",
		map[string]any{"name": "jobs-admin", "rules": []map[string]string{{"prefix": "jobs/", "access": "admin"}}}, &adm)
	for _, c := range []struct {
		who    string
		secret string
		named  bool
	}{{"admin on jobs/", adm.Secret, false}, {"a management token", root.Secret, true}} {
		held := n.sessionAs(jobs.Secret)
		n.as(jobs.Secret, http.StatusOK, "POST", "/v1/acquire",
			map[string]any{"session": held, "locks": []map[string]any{{"name": "jobs/r"}}}, nil)
		var out wire.RevokeResponse
		n.as(c.secret, http.StatusOK, "POST", "/v1/revoke", map[string]any{"name": "jobs/r"}, &out)
		if len(out.Revoked) != 1 || out.Revoked[0].Token == 0 {
			t.Fatalf("%s: revoked %+v, want the one hold", c.who, out)
		}
		if named := out.Revoked[0].Session == held; named != c.named || !named && out.Revoked[0].Session != "" {
			t.Errorf("%s: revoked from session %q, want it named: %v", c.who, out.Revoked[0].Session, c.named)
		}
	}
}

// A timeout explains a wait by a related name only to a token that may
// read that name.
func TestTimeoutDescribesOnlyReadableNames(t *testing.T) {
	n, root, jobs, _ := twoTokens(t)
	var narrow wire.Token
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/acl/tokens",
		map[string]any{"name": "narrow", "rules": []map[string]string{{"prefix": "jobs/a/", "access": "write"}}}, &narrow)
	n.as(jobs.Secret, http.StatusOK, "POST", "/v1/acquire",
		map[string]any{"session": n.sessionAs(jobs.Secret), "locks": []map[string]any{{"name": "jobs/a"}}}, nil)
	for _, c := range []struct {
		who    string
		secret string
		named  bool
	}{{"a token that may not read jobs/a", narrow.Secret, false}, {"a token that may", jobs.Secret, true}} {
		r := n.call(c.secret, "POST", "/v1/acquire",
			map[string]any{"session": n.sessionAs(c.secret), "locks": []map[string]any{{"name": "jobs/a/x"}}, "wait": "0s"})
		body := string(r.body)
		if r.status != http.StatusConflict || !strings.Contains(body, "covered by") {
			t.Fatalf("%s: %v, want 409 timeout, covered by a parent", c.who, r)
		}
		if named := strings.Contains(body, "covered by jobs/a,"); named != c.named {
			t.Errorf("%s: names jobs/a %v, want %v: %s", c.who, named, c.named, body)
		}
	}
}
