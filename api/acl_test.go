package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

// aclCluster starts three nodes with ACLs on and returns them leader
// first.
func aclCluster(t *testing.T) []*testNode {
	return threeNodes(t, nodeOptions{api: func(c *api.Config) { c.ACL = true }})
}

// call sends a request with a bearer token ("" for none) and a JSON body.
// An election under load answers 503 no_leader: call sends the request
// again, for up to 30 s, where any client may (a read, a keepalive, a
// write that says not_applied, an acquire with a request id); any other
// unknown outcome it returns, for the caller to settle.
func (n *testNode) call(token, method, path string, body any) resp {
	n.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := n.callOnce(token, method, path, body)
		repeatable := method == http.MethodGet || notApplied(r) || hasRequestID(body) || strings.HasSuffix(path, "/keepalive")
		if !noLeader(r) || !repeatable || time.Now().After(deadline) {
			return r
		}
	}
}

// hasRequestID reports whether body, an acquire's, carries a request id,
// with which it may be sent again after an unknown outcome.
func hasRequestID(body any) bool {
	m, ok := body.(map[string]any)
	return ok && m["request_id"] != nil
}

// noLeader reports whether r is a 503 no_leader.
func noLeader(r resp) bool {
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	return r.status == http.StatusServiceUnavailable && json.Unmarshal(r.body, &body) == nil && body.Error.Code == "no_leader"
}

func (n *testNode) callOnce(token, method, path string, body any) resp {
	n.t.Helper()
	var rd io.Reader
	if body != nil {
		js, _ := json.Marshal(body)
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, n.ts.URL+path, rd)
	if err != nil {
		n.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, body: b, header: res.Header}
}

// as is call that must answer want, decoding into out.
func (n *testNode) as(token string, want int, method, path string, body, out any) resp {
	n.t.Helper()
	r := n.call(token, method, path, body)
	if r.status != want {
		n.t.Fatalf("%s %s as %.8s: got %s, want %d", method, path, token, r, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			n.t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
	return r
}

func (n *testNode) deniedAs(token string, status int, code, method, path string, body any) {
	n.t.Helper()
	checkErr(n.t, n.call(token, method, path, body), status, code, method+" "+path)
}

// createToken creates a token named name with write access to prefix.
// After an unknown outcome (503 no_leader, an election) it deletes the
// token of that name if one was made, whose secret was in the lost
// answer, and creates it again.
func (n *testNode) createToken(admin, name, prefix string) wire.Token {
	n.t.Helper()
	return n.createTokenWith(admin, name, prefix, "write")
}

// createTokenWith is createToken with the access the token has on prefix.
func (n *testNode) createTokenWith(admin, name, prefix, access string) wire.Token {
	n.t.Helper()
	body := map[string]any{"name": name, "rules": []map[string]string{{"prefix": prefix, "access": access}}}
	var tok wire.Token
	waitFor(n.t, 30*time.Second, "token "+name, func() bool {
		r := n.call(admin, "POST", "/v1/acl/tokens", body)
		if !noLeader(r) {
			if r.status != http.StatusCreated || json.Unmarshal(r.body, &tok) != nil {
				n.t.Fatalf("POST /v1/acl/tokens: got %s, want 201", r)
			}
			return true
		}
		var listed []wire.Token
		n.as(admin, http.StatusOK, "GET", "/v1/acl/tokens", nil, &listed)
		for _, made := range listed {
			if made.Name == name {
				if d := n.call(admin, "DELETE", "/v1/acl/tokens/"+made.ID, nil); d.status != http.StatusOK && !noLeader(d) {
					n.t.Fatalf("DELETE the token of an unknown outcome: got %s", d)
				}
			}
		}
		return false
	})
	return tok
}

// TestACLAcceptance is the check, on a 3-node cluster with ACLs
// on, every request through a follower unless it says otherwise.
func TestACLAcceptance(t *testing.T) {
	var ns []*testNode
	var root wire.Token
	// The bootstrap token's secret is only in the bootstrap's answer: when
	// an election makes its outcome unknown, nothing can settle it, and
	// the test starts again on a new cluster.
	for attempt := 1; ; attempt++ {
		ns = aclCluster(t)
		f1 := ns[1]
		// No token: 401, except status.
		f1.deniedAs("", http.StatusUnauthorized, "unauthorized", "GET", "/v1/locks", nil)
		f1.deniedAs("", http.StatusUnauthorized, "unauthorized", "POST", "/v1/sessions", map[string]any{"ttl": "10s"})
		f1.as("", http.StatusOK, "GET", "/v1/status", nil, nil)
		f1.deniedAs("not-a-token", http.StatusUnauthorized, "unauthorized", "GET", "/v1/locks", nil)

		// Bootstrap once; a second one is 403.
		if r := f1.call("", "POST", "/v1/acl/bootstrap", nil); !noLeader(r) || attempt == 3 {
			if r.status != http.StatusOK || json.Unmarshal(r.body, &root) != nil {
				t.Fatalf("POST /v1/acl/bootstrap: got %s, want 200", r)
			}
			break
		}
	}
	leader, f1, f2 := ns[0], ns[1], ns[2]
	if root.Secret == "" || len(root.Rules) != 1 || root.Rules[0].Access != "admin" {
		t.Fatalf("bootstrap token %+v", root)
	}
	f2.deniedAs("", http.StatusForbidden, "forbidden", "POST", "/v1/acl/bootstrap", nil)

	jobs := f2.createToken(root.Secret, "jobs", "jobs/")
	other := f1.createToken(root.Secret, "other", "jobs/")
	f1.deniedAs(jobs.Secret, http.StatusForbidden, "forbidden", "GET", "/v1/acl/tokens", nil)
	var listed []wire.Token
	f2.as(root.Secret, http.StatusOK, "GET", "/v1/acl/tokens", nil, &listed)
	if len(listed) != 3 {
		t.Fatalf("token list %+v", listed)
	}
	for _, tok := range listed {
		if tok.Secret != "" {
			t.Fatalf("token list shows a secret: %+v", tok)
		}
	}

	// A token limited to jobs/ cannot touch other/; session ids are opaque.
	var s wire.Session
	// A session created in an unknown outcome is left to its TTL, as a
	// client leaves it: the next one is this test's.
	waitFor(t, 30*time.Second, "a session", func() bool {
		r := f1.call(jobs.Secret, "POST", "/v1/sessions", map[string]any{"ttl": "30s"})
		if noLeader(r) {
			return false
		}
		if r.status != http.StatusCreated {
			t.Fatalf("POST /v1/sessions: got %s, want 201", r)
		}
		return json.Unmarshal(r.body, &s) == nil
	})
	if len(s.ID) < 20 || strings.Trim(string(s.ID), "0123456789") == "" {
		t.Fatalf("session id %q is not opaque", s.ID)
	}
	lock := func(name string) map[string]any {
		return map[string]any{"session": s.ID, "locks": []map[string]any{{"name": name}}, "request_id": "r-" + strings.ReplaceAll(name, "/", "-")}
	}
	var g wire.AcquireResponse
	f2.as(jobs.Secret, http.StatusOK, "POST", "/v1/acquire", lock("jobs/a"), &g)
	f2.deniedAs(jobs.Secret, http.StatusForbidden, "forbidden", "POST", "/v1/acquire", lock("other/a"))
	f2.deniedAs(jobs.Secret, http.StatusForbidden, "forbidden", "POST", "/v1/acquire",
		map[string]any{"session": s.ID, "locks": []map[string]any{{"name": "jobs/b"}, {"name": "other/b"}}, "request_id": "r-b"})
	f1.deniedAs(jobs.Secret, http.StatusForbidden, "forbidden", "GET", "/v1/locks/other/a", nil)

	// Another token cannot release, keep alive, close or even see the
	// first one's session: it gets the answer of a session that does not
	// exist, word for word.
	gone := string(f1.call(other.Secret, "GET", "/v1/sessions/no-such-session", nil).body)
	for _, c := range []struct {
		n            *testNode
		method, path string
		body         any
	}{
		{f1, "POST", "/v1/release", map[string]any{"session": s.ID, "name": "jobs/a"}},
		{f2, "POST", "/v1/sessions/" + string(s.ID) + "/keepalive", nil},
		{f1, "DELETE", "/v1/sessions/" + string(s.ID), nil},
		{f2, "GET", "/v1/sessions/" + string(s.ID), nil},
	} {
		r := c.n.call(other.Secret, c.method, c.path, c.body)
		for noLeader(r) {
			// An unknown outcome (an election): as a client does before
			// it sends a release or a close again, look at the session,
			// which must still hold what it held.
			var still wire.Session
			f1.as(jobs.Secret, http.StatusOK, "GET", "/v1/sessions/"+string(s.ID), nil, &still)
			if len(still.Held) != 1 {
				t.Fatalf("%s %s by another token (%s) left the session holding %+v", c.method, c.path, r, still.Held)
			}
			r = c.n.call(other.Secret, c.method, c.path, c.body)
		}
		if r.status != http.StatusNotFound || string(r.body) != gone {
			t.Fatalf("%s %s by another token: %s, want the answer of a missing session: %s", c.method, c.path, r, gone)
		}
	}
	// A batched keepalive by another token: the same answer for its
	// session as for one that does not exist.
	var kept wire.KeepAlivesResponse
	f2.as(other.Secret, http.StatusOK, "POST", "/v1/sessions/keepalive",
		map[string]any{"sessions": []string{string(s.ID), "no-such-session"}}, &kept)
	if len(kept.Sessions) != 2 || kept.Sessions[0].Error == nil || kept.Sessions[1].Error == nil ||
		kept.Sessions[0].Error.Code != "session_not_found" || kept.Sessions[0].Error.Message != kept.Sessions[1].Error.Message {
		t.Fatalf("batched keepalive by another token: %+v, want both answered as missing sessions", kept)
	}
	var mine []wire.Session
	f2.as(other.Secret, http.StatusOK, "GET", "/v1/sessions", nil, &mine)
	if len(mine) != 0 {
		t.Fatalf("another token lists %d sessions, want none", len(mine))
	}
	// An unknown session is 404 whatever it looks like.
	f1.deniedAs(jobs.Secret, http.StatusNotFound, "session_not_found", "POST", "/v1/sessions/no-such-session/keepalive", nil)

	// Revoke: admin only; /v1/check says the token is invalid; the holder's
	// session says what it lost.
	f2.deniedAs(jobs.Secret, http.StatusForbidden, "forbidden", "POST", "/v1/revoke", map[string]any{"name": "jobs/a"})
	var rv wire.RevokeResponse
	f1.as(root.Secret, http.StatusOK, "POST", "/v1/revoke", map[string]any{"name": "jobs/a"}, &rv)
	if len(rv.Revoked) != 1 || rv.Revoked[0].Session != s.ID || rv.Revoked[0].Token != g.Token {
		t.Fatalf("revoked %+v, want session %s token %d", rv.Revoked, s.ID, g.Token)
	}
	var chk wire.CheckResponse
	f2.as(jobs.Secret, http.StatusOK, "GET", "/v1/check?name=jobs/a&token="+itoa(g.Token), nil, &chk)
	if chk.Valid {
		t.Fatalf("check after revoke: %+v", chk)
	}
	var ka wire.KeepAliveResponse
	f2.as(jobs.Secret, http.StatusOK, "POST", "/v1/sessions/"+string(s.ID)+"/keepalive", nil, &ka)
	if len(ka.Revoked) != 1 || ka.Revoked[0].Name != "jobs/a" || ka.Revoked[0].Token != g.Token {
		t.Fatalf("keepalive's revocations %+v", ka.Revoked)
	}
	var mineKept wire.KeepAlivesResponse
	f1.as(jobs.Secret, http.StatusOK, "POST", "/v1/sessions/keepalive", map[string]any{"sessions": []string{string(s.ID)}}, &mineKept)
	if k := mineKept.Sessions; len(k) != 1 || k[0].Error != nil || len(k[0].Revoked) != 1 || k[0].Revoked[0].Token != g.Token {
		t.Fatalf("batched keepalive's revocations %+v", mineKept)
	}

	// Paging.
	for _, name := range []string{"jobs/p1", "jobs/p2", "jobs/p3"} {
		f1.as(jobs.Secret, http.StatusOK, "POST", "/v1/acquire", lock(name), nil)
	}
	var page []wire.Lock
	r := f2.as(root.Secret, http.StatusOK, "GET", "/v1/locks?limit=2", nil, &page)
	if len(page) != 2 || r.header.Get("X-Next-After") != page[1].Name {
		t.Fatalf("page of 2: %d locks, X-Next-After %q", len(page), r.header.Get("X-Next-After"))
	}
	r = f2.as(root.Secret, http.StatusOK, "GET", "/v1/locks?limit=2&after="+page[1].Name, nil, &page)
	if len(page) != 1 || page[0].Name != "jobs/p3" || r.header.Get("X-Next-After") != "" {
		t.Fatalf("last page: %+v, X-Next-After %q", page, r.header.Get("X-Next-After"))
	}

	// A deleted token gets 401 at once, on every node.
	leader.deleted(root.Secret, "/v1/acl/tokens/"+jobs.ID)
	for _, n := range ns {
		n.deniedAs(jobs.Secret, http.StatusUnauthorized, "unauthorized", "GET", "/v1/locks", nil)
		n.deniedAs(jobs.Secret, http.StatusUnauthorized, "unauthorized", "POST", "/v1/sessions/"+string(s.ID)+"/keepalive", nil)
		n.deniedAs(jobs.Secret, http.StatusUnauthorized, "unauthorized", "POST", "/v1/sessions/keepalive",
			map[string]any{"sessions": []string{string(s.ID)}})
	}
	// Its session lives on; an admin may close it.
	f1.deleted(root.Secret, "/v1/sessions/"+string(s.ID))
}

// deleted sends DELETE path as token and wants 200. After an unknown
// outcome (503 no_leader, an election) it sends it again, and a 404 then
// says that the earlier attempt deleted it.
func (n *testNode) deleted(token, path string) {
	n.t.Helper()
	unknown := false
	waitFor(n.t, 30*time.Second, "DELETE "+path, func() bool {
		r := n.call(token, "DELETE", path, nil)
		switch {
		case noLeader(r):
			unknown = true
			return false
		case r.status == http.StatusOK, unknown && r.status == http.StatusNotFound:
			return true
		}
		n.t.Fatalf("DELETE %s: got %s, want 200", path, r)
		return false
	})
}

func itoa(v uint64) string { b, _ := json.Marshal(v); return string(b) }
