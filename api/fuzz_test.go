package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

// documentedCodes are the error codes of docs/api.md: anything else in an
// answer to bad input is a bug.
var documentedCodes = map[string]bool{
	"invalid_request": true, "unauthorized": true, "forbidden": true, "session_not_found": true,
	"request_not_found": true, "lock_not_found": true, "token_not_found": true, "timeout": true,
	"deadlock": true, "poorly_ordered_access": true, "not_held": true, "limit_mismatch": true,
	"limit_exceeded": true, "cancelled": true, "no_leader": true, "not_found": true, "member_alive": true,
}

var fuzzMethods = []string{"GET", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"}

// FuzzAPI sends fuzzed requests to every endpoint of one real node (ACLs
// on, a management token for most requests) and checks each answer: no
// panic, no 5xx, and every error in the documented shape with a
// documented code. The seeds are a valid request for every endpoint.
func FuzzAPI(f *testing.F) {
	n := singleNode(f, nodeOptions{api: func(c *api.Config) {
		c.ACL, c.MaxWait, c.MaxStreamDuration = true, 50*time.Millisecond, 20*time.Millisecond
	}})
	var root wire.Token
	n.as("", http.StatusOK, "POST", "/v1/acl/bootstrap", nil, &root)
	var s wire.Session
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/sessions", map[string]any{"ttl": "60s"}, &s)
	sid := string(s.ID)
	for _, seed := range []struct {
		method byte
		path   string
		body   string
	}{
		{1, "/v1/sessions", `{"ttl":"10s","name":"n","on_deadlock":"surrender","ordered":true,"lock_delay":"1s"}`},
		{0, "/v1/sessions", ``},
		{0, "/v1/sessions/" + sid, ``},
		{1, "/v1/sessions/" + sid + "/keepalive", ``},
		{3, "/v1/sessions/nope", ``},
		{1, "/v1/acquire", `{"session":"` + sid + `","request_id":"r1","locks":[{"name":"a/b","mode":"read"},{"name":"s","weight":2,"limit":3}],"require":"any","wait":"10ms","hold_ttl":"1s"}`},
		{2, "/v1/locks/x/y?session=" + sid + "&mode=write&wait=1ms", ``},
		{3, "/v1/locks/x/y?session=" + sid, ``},
		{1, "/v1/release", `{"session":"` + sid + `","name":"a/b"}`},
		{1, "/v1/release", `{"session":"` + sid + `","request_id":"r1"}`},
		{1, "/v1/surrender", `{"session":"` + sid + `","name":"s"}`},
		{0, "/v1/requests/r1?wait=1ms", ``},
		{3, "/v1/requests/r1?session=" + sid, ``},
		{0, "/v1/locks?prefix=a/&limit=2&after=a", ``},
		{0, "/v1/locks/a/b?index=3&wait=1ms", ``},
		{0, "/v1/check?name=a/b&token=3", ``},
		{0, "/v1/status", ``},
		{0, "/v1/waitgraph?stale", ``},
		{0, "/v1/events", ``},
		{0, "/metrics", ``},
		{1, "/v1/acl/tokens", `{"name":"t","rules":[{"prefix":"jobs/","access":"write"}]}`},
		{0, "/v1/acl/tokens", ``},
		{3, "/v1/acl/tokens/00000000-0000-4000-8000-000000000000", ``},
		{1, "/v1/acl/bootstrap", ``},
		{1, "/v1/revoke", `{"name":"x/y"}`},
		{3, "/v1/members/n9", ``},
		{0, "/ui/", ``},
	} {
		f.Add(seed.method, seed.path, []byte(seed.body), true, true)
	}
	f.Fuzz(func(t *testing.T, method byte, path string, body []byte, asJSON, withToken bool) {
		if !strings.HasPrefix(path, "/") || strings.Contains(path, "/agent/leave") {
			return // not a request line; leave would stop the node
		}
		req, err := http.NewRequest(fuzzMethods[int(method)%len(fuzzMethods)], "http://lockd"+path, strings.NewReader(string(body)))
		if err != nil {
			return
		}
		if asJSON {
			req.Header.Set("Content-Type", "application/json")
		}
		if withToken {
			req.Header.Set("Authorization", "Bearer "+root.Secret)
		}
		rec := httptest.NewRecorder()
		n.srv.ServeHTTP(rec, req)
		checkFuzzAnswer(t, req, rec)
	})
}

func checkFuzzAnswer(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s %s: %d %s", req.Method, req.URL, rec.Code, rec.Body)
	}
	if rec.Code < 400 || strings.HasPrefix(req.URL.Path, "/ui") {
		return // the dashboard's files: Go's file server answers in text
	}
	var eb wire.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || !documentedCodes[eb.Error.Code] || eb.Error.Message == "" {
		t.Fatalf("%s %s: %d with %q, not a documented error", req.Method, req.URL, rec.Code, rec.Body)
	}
}
