package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/raftnode"
)

func TestSessionLifecycle(t *testing.T) {
	n := singleNode(t, nodeOptions{})

	var s wire.Session
	n.must(http.StatusCreated, "POST", "/v1/sessions",
		`{"ttl":"10s","name":"nightly-backup","on_deadlock":"surrender","ordered":true,"lock_delay":"2s"}`, &s)
	if s.ID == "" || s.Name != "nightly-backup" || s.TTL != wire.Duration(10e9) || s.OnDeadlock != "surrender" ||
		!s.Ordered || s.LockDelay != wire.Duration(2e9) {
		t.Fatalf("created session = %+v", s)
	}
	id := string(s.ID)

	// Defaults: an empty body is a session with the default TTL.
	var d wire.Session
	n.must(http.StatusCreated, "POST", "/v1/sessions", nil, &d)
	if d.TTL != wire.Duration(api.DefaultSessionTTL) || d.OnDeadlock != "abort" {
		t.Fatalf("default session = %+v", d)
	}

	var got wire.Session
	n.must(http.StatusOK, "GET", "/v1/sessions/"+id, nil, &got)
	if got.ID != s.ID || got.Name != "nightly-backup" || len(got.Held) != 0 || len(got.Pending) != 0 {
		t.Fatalf("GET session = %+v", got)
	}
	n.mustGrant(id, "jobs/backup", "write")
	n.must(http.StatusOK, "GET", "/v1/sessions/"+id+"?stale", nil, &got)
	if len(got.Held) != 1 || got.Held[0].Name != "jobs/backup" || got.Held[0].Mode != wire.Write || got.Held[0].Count != 1 {
		t.Fatalf("held = %+v", got.Held)
	}

	var list []wire.Session
	n.must(http.StatusOK, "GET", "/v1/sessions", nil, &list)
	// Listed by id, which is random: either order.
	if len(list) != 2 || list[0].ID >= list[1].ID || (list[0].ID != s.ID && list[1].ID != s.ID) || (list[0].ID != d.ID && list[1].ID != d.ID) {
		t.Fatalf("list = %+v", list)
	}

	var ka wire.KeepAliveResponse
	n.must(http.StatusOK, "POST", "/v1/sessions/"+id+"/keepalive", nil, &ka)
	if ka.ID != s.ID || ka.TTL != wire.Duration(10e9) {
		t.Fatalf("keepalive = %+v", ka)
	}

	var closed wire.CloseSessionResponse
	n.must(http.StatusOK, "DELETE", "/v1/sessions/"+id, nil, &closed)
	if len(closed.Released) != 1 || closed.Released[0].Name != "jobs/backup" {
		t.Fatalf("close = %+v", closed)
	}
	n.mustErr(http.StatusNotFound, "session_not_found", "GET", "/v1/sessions/"+id, nil)
	n.mustErr(http.StatusNotFound, "session_not_found", "POST", "/v1/sessions/"+id+"/keepalive", nil)
	n.mustErr(http.StatusNotFound, "session_not_found", "DELETE", "/v1/sessions/"+id, nil)
	// The lock went with the session.
	n.mustErr(http.StatusNotFound, "lock_not_found", "GET", "/v1/locks/jobs/backup", nil)
}

// Session ids are opaque and unguessable: at least 20 characters drawn by
// the leader, never a decimal number; any id that names no session, of
// whatever shape, is 404 session_not_found.
func TestSessionIDsAreOpaque(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	seen := map[string]bool{}
	for range 5 {
		var s wire.Session
		n.must(http.StatusCreated, "POST", "/v1/sessions", `{"ttl":"5s"}`, &s)
		if len(s.ID) < 20 || strings.Trim(string(s.ID), "0123456789") == "" || seen[s.ID] {
			t.Fatalf("session id %q: want 20+ characters, not decimal, not seen before", s.ID)
		}
		seen[s.ID] = true
	}
	for _, id := range []string{"no-such-session", "1", "2", "0", "AAAAAAAAAAAAAAAAAAAAAA", "%00"} {
		n.mustErr(http.StatusNotFound, "session_not_found", "POST", "/v1/sessions/"+id+"/keepalive", nil)
		n.mustErr(http.StatusNotFound, "session_not_found", "POST", "/v1/acquire",
			map[string]any{"session": id, "locks": []map[string]any{{"name": "a"}}})
	}
	n.mustErr(http.StatusNotFound, "session_not_found", "POST", "/v1/release", `{"session":12,"name":"a"}`)
}

// POST /v1/sessions/keepalive keeps many sessions alive in one request:
// each answered in the request's order as its own keepalive would be, a
// bad batch refused whole.
func TestKeepAliveMany(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	a, b, gone := n.session(`{"ttl":"10s"}`), n.session(`{"ttl":"20s"}`), n.session(nil)
	n.must(http.StatusOK, "DELETE", "/v1/sessions/"+gone, nil, nil)

	var got wire.KeepAlivesResponse
	n.must(http.StatusOK, "POST", "/v1/sessions/keepalive",
		map[string]any{"sessions": []string{b, gone, a, "no-such-session", ""}}, &got)
	want := []struct {
		id, code string
		ttl      wire.Duration
	}{{b, "", wire.Duration(20e9)}, {gone, "session_not_found", 0}, {a, "", wire.Duration(10e9)},
		{"no-such-session", "session_not_found", 0}, {"", "invalid_request", 0}}
	if len(got.Sessions) != len(want) {
		t.Fatalf("answer %+v, want %d entries", got, len(want))
	}
	for i, w := range want {
		k := got.Sessions[i]
		code, status := "", 0
		if k.Error != nil {
			code, status = k.Error.Code, k.Status
		}
		wantStatus := map[string]int{"": 0, "session_not_found": 404, "invalid_request": 400}[w.code]
		if k.ID != w.id || code != w.code || k.TTL != w.ttl || status != wantStatus {
			t.Errorf("entry %d = %+v (error %+v), want id %q code %q ttl %v", i, k, k.Error, w.id, w.code, w.ttl)
		}
	}
	// The same error as the session's own keepalive, word for word.
	own := n.mustErr(http.StatusNotFound, "session_not_found", "POST", "/v1/sessions/"+gone+"/keepalive", nil)
	if got.Sessions[1].Error == nil || !strings.Contains(own, got.Sessions[1].Error.Message) {
		t.Errorf("batched error %+v, the keepalive's own %s", got.Sessions[1].Error, own)
	}

	many := make([]string, 1001)
	for i := range many {
		many[i] = a
	}
	for _, body := range []any{`{"sessions":[]}`, `{}`, `{"sessions":"x"}`, map[string]any{"sessions": many}} {
		n.mustErr(http.StatusBadRequest, "invalid_request", "POST", "/v1/sessions/keepalive", body)
	}
}

// A refusal for load tells the client when to come back: a limit's 429,
// and the 503 of a node that already holds the most requests that may
// wait for a leader (answered at once, nothing done), carry Retry-After.
func TestRefusalsForLoadSayRetryAfter(t *testing.T) {
	full := singleNode(t, nodeOptions{raft: func(c *raftnode.Config) { c.Limits.Sessions = 1 }})
	full.session(nil)
	r := full.do("POST", "/v1/sessions", nil)
	checkErr(t, r, http.StatusTooManyRequests, "limit_exceeded", "a session past --max-sessions")
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Fatalf("429 with Retry-After %q, want 1", got)
	}

	// Not bootstrapped: no leader comes, and every request waits for one.
	n := startNode(t, "n1", nil, nodeOptions{raft: func(c *raftnode.Config) { c.MaxLeaderWaits = 1 }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // keeps the one place taken while the test runs
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", n.ts.URL+"/v1/sessions", nil)
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}
	}()
	probe := &http.Client{Timeout: 300 * time.Millisecond} // one that takes the place itself gives it back
	var last resp
	waitFor(t, 30*time.Second, "a request turned away at once", func() bool {
		res, err := probe.Get(n.ts.URL + "/v1/locks")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		last = resp{status: res.StatusCode, body: b, header: res.Header}
		return res.StatusCode == http.StatusServiceUnavailable
	})
	var body wire.ErrorBody
	if err := json.Unmarshal(last.body, &body); err != nil || body.Error.Code != "no_leader" || !body.Error.NotApplied ||
		last.header.Get("Retry-After") != "1" {
		t.Fatalf("turned away with %s (Retry-After %q), want 503 no_leader, not_applied, Retry-After 1", last, last.header.Get("Retry-After"))
	}
}
