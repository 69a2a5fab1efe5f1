package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

// Two tokens' sessions use one request id: each is granted on its own, a
// GET or DELETE of the id finds the caller's own (narrowed by ?session=),
// and another token's request is neither revealed (its answer is the very
// answer of an unused id) nor in the way.
func TestTwoTokensOneRequestID(t *testing.T) {
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.ACL = true }})
	var root wire.Token
	n.as("", http.StatusOK, "POST", "/v1/acl/bootstrap", nil, &root)
	db, jobs := n.createToken(root.Secret, "db", "db/"), n.createToken(root.Secret, "jobs", "jobs/")
	session := func(token string) string {
		var s wire.Session
		n.as(token, http.StatusCreated, "POST", "/v1/sessions", map[string]any{"ttl": "30s"}, &s)
		return string(s.ID)
	}
	sdb, sjobs, sjobs2 := session(db.Secret), session(jobs.Secret), session(jobs.Secret)
	grant := func(token, s, name string) wire.AcquireResponse {
		var g wire.AcquireResponse
		n.as(token, http.StatusOK, "POST", "/v1/acquire",
			map[string]any{"session": s, "request_id": "job", "locks": []map[string]any{{"name": name}}}, &g)
		if g.Status != "granted" || string(g.Session) != s {
			t.Fatalf("acquire by %s: %+v", name, g)
		}
		return g
	}
	gdb, gjobs := grant(db.Secret, sdb, "db/a"), grant(jobs.Secret, sjobs, "jobs/a")
	if gdb.Token == gjobs.Token {
		t.Fatalf("one token for two grants: %+v %+v", gdb, gjobs)
	}
	// The answer of an id the caller never used: jobs's other session.
	unused := n.call(jobs.Secret, "GET", "/v1/requests/job?session="+sjobs2, nil)
	checkErr(t, unused, http.StatusNotFound, "request_not_found", "GET an unused id")

	for _, tc := range []struct {
		token, method, path string
		status              int
		session             string // the request answered, for 200
		code                string // for an error; request_not_found must be the unused id's answer
	}{
		{jobs.Secret, "GET", "/v1/requests/job", http.StatusOK, sjobs, ""},
		{db.Secret, "GET", "/v1/requests/job", http.StatusOK, sdb, ""},
		{jobs.Secret, "GET", "/v1/requests/job?session=" + sjobs, http.StatusOK, sjobs, ""},
		{jobs.Secret, "GET", "/v1/requests/job?wait=1s", http.StatusOK, sjobs, ""},
		{jobs.Secret, "GET", "/v1/requests/job?session=" + sdb, http.StatusNotFound, "", "request_not_found"},
		{db.Secret, "GET", "/v1/requests/job?session=" + sjobs + "&wait=1s", http.StatusNotFound, "", "request_not_found"},
		{root.Secret, "GET", "/v1/requests/job", http.StatusBadRequest, "", "invalid_request"},
		{root.Secret, "GET", "/v1/requests/job?session=" + sdb, http.StatusOK, sdb, ""},
		{jobs.Secret, "DELETE", "/v1/requests/job?session=" + sdb, http.StatusNotFound, "", "request_not_found"},
		{db.Secret, "DELETE", "/v1/requests/job", http.StatusOK, sdb, ""}, // granted: the cancel changes nothing
		{root.Secret, "DELETE", "/v1/requests/job", http.StatusBadRequest, "", "invalid_request"},
		{root.Secret, "DELETE", "/v1/requests/job?session=" + sjobs, http.StatusOK, sjobs, ""},
	} {
		what := tc.method + " " + tc.path
		r := n.call(tc.token, tc.method, tc.path, nil)
		if tc.code != "" {
			checkErr(t, r, tc.status, tc.code, what)
			if tc.code == "request_not_found" && string(r.body) != string(unused.body) {
				t.Fatalf("%s: %s, not the answer of an unused id %s", what, r, unused)
			}
			continue
		}
		var got wire.Request
		if r.status != tc.status || json.Unmarshal(r.body, &got) != nil || string(got.Session) != tc.session || got.Status != "granted" {
			t.Fatalf("%s: %s; want session %s's grant", what, r, tc.session)
		}
	}
	// Both still hold what they were granted.
	for _, c := range []struct{ token, session string }{{db.Secret, sdb}, {jobs.Secret, sjobs}} {
		var s wire.Session
		n.as(c.token, http.StatusOK, "GET", "/v1/sessions/"+c.session, nil, &s)
		if len(s.Held) != 1 {
			t.Fatalf("session %s holds %+v", c.session, s.Held)
		}
	}
}
