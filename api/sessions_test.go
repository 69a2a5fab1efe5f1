package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
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
