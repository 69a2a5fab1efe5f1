package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

// TestBadInputChangesNothing sends every kind of invalid request: each is
// answered 400 invalid_request before anything is proposed, so the table's
// applied index and digest do not move.
func TestBadInputChangesNothing(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)
	before := n.status()

	long := strings.Repeat("x", 129)
	deep := strings.Repeat("a/", 16) + "a"
	huge := `{"ttl":"10s","name":"` + strings.Repeat("x", 70<<10) + `"}`
	lock := func(spec string) string {
		return `{"session":"` + s + `","locks":[` + spec + `]}`
	}
	cases := []struct{ method, path, body string }{
		{"POST", "/v1/sessions", `{`},
		{"POST", "/v1/sessions", `{"ttl":"10s","bogus":1}`},
		{"POST", "/v1/sessions", `{"ttl":10}`},
		{"POST", "/v1/sessions", `{"ttl":"10 sec"}`},
		{"POST", "/v1/sessions", `{"ttl":"100ms"}`},
		{"POST", "/v1/sessions", `{"ttl":"25h"}`},
		{"POST", "/v1/sessions", `{"ttl":"10s","on_deadlock":"explode"}`},
		{"POST", "/v1/sessions", `{"ttl":"10s","lock_delay":"2m"}`},
		{"POST", "/v1/sessions", `{"ttl":"10s"} {"ttl":"10s"}`},
		{"POST", "/v1/sessions", `[]`},
		{"POST", "/v1/sessions", huge},
		{"POST", "/v1/acquire", `not json`},
		{"POST", "/v1/acquire", ``},
		{"POST", "/v1/acquire", `{"locks":[{"name":"a"}]}`},
		{"POST", "/v1/acquire", lock(``)},
		{"POST", "/v1/acquire", lock(`{"name":""}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a//b"}`)},
		{"POST", "/v1/acquire", lock(`{"name":"/a"}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a\u0001"}`)},
		{"POST", "/v1/acquire", lock(`{"name":"` + long + `"}`)},
		{"POST", "/v1/acquire", lock(`{"name":"` + deep + `"}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a","mode":"exclusive"}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a","mode":"read","weight":2}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a","weight":-1}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a","weight":3,"limit":2}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a","limit":-1}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a","limit":2000000}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a","bogus":true}`)},
		{"POST", "/v1/acquire", lock(`{"name":"a"},{"name":"a"}`)},
		{"POST", "/v1/acquire", `{"session":"` + s + `","locks":[{"name":"a"}],"require":"most"}`},
		{"POST", "/v1/acquire", `{"session":"` + s + `","locks":[{"name":"a"}],"wait":"-1s"}`},
		{"POST", "/v1/acquire", `{"session":"` + s + `","locks":[{"name":"a"}],"wait":"25h"}`},
		{"POST", "/v1/acquire", `{"session":"` + s + `","locks":[{"name":"a"}],"wait":30}`},
		{"POST", "/v1/acquire", `{"session":"` + s + `","locks":[{"name":"a"}],"hold_ttl":"forever"}`},
		{"POST", "/v1/acquire", `{"session":"` + s + `","locks":[{"name":"a"}],"request_id":"~mine"}`},
		{"POST", "/v1/acquire", `{"session":"` + s + `","locks":[{"name":"a"}],"request_id":"a/b"}`},
		{"POST", "/v1/acquire", `{"session":"` + s + `","locks":[{"name":"a"}],"request_id":"` + long + `"}`},
		{"PUT", "/v1/locks/a", ``},
		{"PUT", "/v1/locks/a?session=" + s + "&mode=exclusive", ``},
		{"PUT", "/v1/locks/a?session=" + s + "&wait=soon", ``},
		{"PUT", "/v1/locks/a?session=" + s + "&weight=x", ``},
		{"PUT", "/v1/locks/" + long + "?session=" + s, ``},
		{"PUT", "/v1/locks/" + deep + "?session=" + s, ``},
		{"DELETE", "/v1/locks/a", ``},
		{"DELETE", "/v1/locks/" + long + "?session=" + s, ``},
		{"POST", "/v1/release", `{"session":"` + s + `"}`},
		{"POST", "/v1/release", `{"session":"` + s + `","name":"a","request_id":"r"}`},
		{"POST", "/v1/release", `{"session":"` + s + `","name":"a//b"}`},
		{"POST", "/v1/release", `{"name":"a"}`},
		{"POST", "/v1/surrender", `{"session":"` + s + `","name":""}`},
		{"POST", "/v1/surrender", `{"session":"` + s + `","name":"a","x":1}`},
		{"GET", "/v1/check?name=&token=1", ``},
		{"GET", "/v1/check?name=a&token=x", ``},
		{"GET", "/v1/check?name=a", ``},
		{"GET", "/v1/locks/a?index=abc", ``},
		{"GET", "/v1/locks/a?index=1&wait=later", ``},
		{"GET", "/v1/locks/" + long, ``},
		{"GET", "/v1/requests/x?wait=later", ``},
	}
	for _, c := range cases {
		what := fmt.Sprintf("%s %s %.60s", c.method, c.path, c.body)
		var body any
		if c.body != "" {
			body = c.body
		}
		checkErr(t, n.do(c.method, c.path, body), http.StatusBadRequest, "invalid_request", what)
	}
	// Session ids are opaque: one that names no session is not malformed,
	// it is not found.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/acquire", `{"session":"abc","locks":[{"name":"a"}]}`},
		{"POST", "/v1/acquire", `{"session":"0","locks":[{"name":"a"}]}`},
		{"PUT", "/v1/locks/a?session=abc", ``},
		{"GET", "/v1/sessions/abc", ``},
		{"DELETE", "/v1/sessions/0", ``},
		{"POST", "/v1/sessions/-1/keepalive", ``},
		{"DELETE", "/v1/requests/x?session=abc", ``},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		checkErr(t, n.do(c.method, c.path, body), http.StatusNotFound, "session_not_found", c.method+" "+c.path+" "+c.body)
	}

	after := n.status()
	if after.AppliedIndex != before.AppliedIndex || after.Digest != before.Digest {
		t.Fatalf("bad input changed the table: index %d -> %d, digest %s -> %s",
			before.AppliedIndex, after.AppliedIndex, before.Digest, after.Digest)
	}
}

func TestOversizedBody(t *testing.T) {
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.MaxBodyBytes = 1024 }})
	body := `{"session":"1","locks":[` + strings.Repeat(`{"name":"a"},`, 200) + `{"name":"b"}]}`
	msg := n.mustErr(http.StatusBadRequest, "invalid_request", "POST", "/v1/acquire", body)
	if !strings.Contains(msg, "larger than 1024") {
		t.Fatalf("message %q", msg)
	}
}

func TestUnknownEndpoint(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	n.mustErr(http.StatusNotFound, "not_found", "GET", "/v1/nothing-here", nil)
}

// TestNoLeader: a node that was never bootstrapped has no leader. Writes
// and linearizable reads answer 503 no_leader; ?stale reads and status
// still answer.
func TestNoLeader(t *testing.T) {
	n := startNode(t, "lonely", nil, nodeOptions{api: func(c *api.Config) { c.ProposeTimeout = 2 * time.Second }})

	r := n.do("POST", "/v1/sessions", `{"ttl":"10s"}`)
	checkErr(t, r, http.StatusServiceUnavailable, "no_leader", "POST /v1/sessions")
	if !strings.Contains(string(r.body), `"not_applied":true`) {
		t.Fatalf("no leader took the write, but the 503 does not say it was not applied: %s", r.body)
	}
	msg := n.mustErr(http.StatusServiceUnavailable, "no_leader", "POST", "/v1/acquire",
		`{"session":"5","request_id":"nl-1","locks":[{"name":"a"}]}`)
	if !strings.Contains(msg, "nl-1") {
		t.Fatalf("no_leader message %q does not carry the request id", msg)
	}
	n.mustErr(http.StatusServiceUnavailable, "no_leader", "POST", "/v1/sessions/5/keepalive", nil)
	n.mustErr(http.StatusServiceUnavailable, "no_leader", "GET", "/v1/locks", nil)
	n.mustErr(http.StatusServiceUnavailable, "no_leader", "GET", "/v1/check?name=a&token=1", nil)

	var ls []wire.Lock
	n.must(http.StatusOK, "GET", "/v1/locks?stale", nil, &ls)
	if len(ls) != 0 {
		t.Fatalf("stale list = %+v", ls)
	}
	st := n.status()
	if st.NodeID != "lonely" || st.Leader.ID != "" || st.State == "leader" {
		t.Fatalf("status = %+v", st)
	}
}

// TestWaitWithoutLeader: a waiter whose deadline no leader ticks proposes a
// cancel; when that cannot commit either it answers 503 no_leader with the
// request id, so the client can re-attach elsewhere.
func TestWaitWithoutLeader(t *testing.T) {
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.ProposeTimeout = 2 * time.Second }})
	a, b := n.session(nil), n.session(nil)
	n.mustGrant(a, "x", "write")
	ch := async(func() resp { return n.acquire(b, "x", "write", "1s", "orphan-1") })
	n.waitPending("orphan-1")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.node.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	msg := checkErr(t, recv(t, ch, 15*time.Second, "the leaderless wait"), http.StatusServiceUnavailable, "no_leader", "leaderless wait")
	t.Logf("answer: %s", msg)
	if !strings.Contains(msg, "orphan-1") || !strings.Contains(msg, "/v1/requests/orphan-1") {
		t.Fatalf("message %q does not say how to re-attach", msg)
	}
}

// TestCloseEndsWaits: a node shutting down ends its waits with 503, so
// clients re-attach elsewhere instead of hanging.
func TestCloseEndsWaits(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	a, b := n.session(nil), n.session(nil)
	n.mustGrant(a, "x", "write")
	ch := async(func() resp { return n.acquire(b, "x", "write", "20s", "closing-1") })
	n.waitPending("closing-1")
	n.srv.Close()
	msg := checkErr(t, recv(t, ch, 5*time.Second, "the ended wait"), http.StatusServiceUnavailable, "no_leader", "closing")
	if !strings.Contains(msg, "closing-1") {
		t.Fatalf("message %q", msg)
	}
}

// The internal RPC lives on the node port only: the client port knows no
// /internal/ path, so a client cannot propose an expiry of another's
// session or a command the API would refuse.
func TestInternalPathsAreNotOnTheClientPort(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	before := n.status()
	for _, path := range []string{"/internal/v1/propose", "/internal/v1/readindex", "/internal/v1/keepalive", "/internal/v1/remove"} {
		if r := n.do("POST", path, map[string]any{"session": 1}); r.status != http.StatusNotFound {
			t.Errorf("POST %s on the client port: %s, want 404", path, r)
		}
	}
	if after := n.status(); after.AppliedIndex != before.AppliedIndex {
		t.Fatalf("applied index moved from %d to %d", before.AppliedIndex, after.AppliedIndex)
	}
}
