package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

// fuzzEndpoints are the API's endpoints for FuzzAPIDecode: a method and a
// path, to which the fuzzed tail is appended (a name, an id or a query).
var fuzzEndpoints = []struct{ method, path string }{
	{"POST", "/v1/sessions"},
	{"GET", "/v1/sessions"},
	{"GET", "/v1/sessions/"},
	{"DELETE", "/v1/sessions/"},
	{"POST", "/v1/sessions/"}, // + id/keepalive
	{"POST", "/v1/acquire"},
	{"PUT", "/v1/locks/"},
	{"DELETE", "/v1/locks/"},
	{"POST", "/v1/release"},
	{"POST", "/v1/surrender"},
	{"GET", "/v1/requests/"},
	{"DELETE", "/v1/requests/"},
	{"GET", "/v1/locks"},
	{"GET", "/v1/locks/"},
	{"GET", "/v1/check"},
	{"GET", "/v1/status"},
	{"GET", "/v1/waitgraph"},
	{"GET", "/v1/events"},
	{"POST", "/v1/acl/tokens"},
	{"POST", "/v1/revoke"},
	{"DELETE", "/v1/members/"},
	{"POST", "/v1/certs/denied"},
	{"POST", "/v1/proclaim"},
	{"GET", "/v1/elections/"},
}

// FuzzAPIDecode drives the decoding of every endpoint's path, query and JSON
// body on one real node without ACLs (FuzzAPI covers them with ACLs on
// and fuzzes methods and paths at large). "$S" in the tail or body stands
// for a live session, made anew once one is closed, so that fuzzed
// requests get past the session lookup into the rest of their decoding.
// Every answer must be a success or a documented error, never a 5xx but
// 503, and the node must not panic.
func FuzzAPIDecode(f *testing.F) {
	n := singleNode(f, nodeOptions{api: func(c *api.Config) {
		c.MaxWait, c.MaxStreamDuration = 50*time.Millisecond, 20*time.Millisecond
	}})
	live := &liveSession{n: n}
	for _, seed := range []struct {
		endpoint   uint8
		tail, body string
	}{
		{0, "", `{"ttl":"10s","name":"nightly","on_deadlock":"surrender","ordered":true,"lock_delay":"1s"}`},
		{0, "", `{}`},
		{1, "?limit=2&after=x&stale", ``},
		{2, "$S", ``},
		{3, "$S", ``},
		{4, "$S/keepalive", ``},
		{5, "", `{"session":"$S","request_id":"r1","locks":[{"name":"a/b","mode":"read"},{"name":"s","weight":2,"limit":3}],"require":"majority","wait":"10ms","hold_ttl":"1s"}`},
		{6, "x/y?session=$S&mode=write&wait=1ms&weight=1&limit=2&hold_ttl=1s&request_id=r2", ``},
		{7, "x/y?session=$S", ``},
		{8, "", `{"session":"$S","name":"a/b"}`},
		{8, "", `{"session":"$S","request_id":"r1"}`},
		{9, "", `{"session":"$S","name":"s"}`},
		{10, "r1?wait=1ms", ``},
		{11, "r1?session=$S", ``},
		{12, "?prefix=a/&limit=2&after=a", ``},
		{13, "a/b?index=3&wait=1ms", ``},
		{14, "?name=a/b&token=3", ``},
		{15, "", ``},
		{16, "?stale", ``},
		{17, "", ``},
		{18, "", `{"name":"t","rules":[{"prefix":"jobs/","access":"write"}]}`},
		{19, "", `{"name":"x/y"}`},
		{20, "n9", ``},
		{21, "", `{"serial":"5C:1F:00:9A","reason":"stolen"}`},
		{21, "", `{"serial":"zz"}`},
		{5, "", `{"session":"$S","locks":[{"name":"e","value":"10.0.0.7:8080"}]}`},
		{22, "", `{"session":"$S","name":"e","value":"10.0.0.7:9090","token":5}`},
		{23, "e?index=3&wait=1ms&stale", ``},
	} {
		f.Add(seed.endpoint, seed.tail, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, endpoint uint8, tail string, body []byte) {
		ep := fuzzEndpoints[int(endpoint)%len(fuzzEndpoints)]
		sid := live.id(t)
		path := ep.path + strings.ReplaceAll(tail, "$S", sid)
		req, err := http.NewRequest(ep.method, "http://lockd"+path, strings.NewReader(strings.ReplaceAll(string(body), "$S", sid)))
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		n.srv.ServeHTTP(rec, req)
		checkFuzzAnswer(t, req, rec)
		if rec.Code == http.StatusOK && ep.method == "DELETE" && strings.HasPrefix(path, "/v1/sessions/") {
			live.closed()
		}
	})
}

// liveSession is FuzzAPIDecode's session, made again when a request closed it.
type liveSession struct {
	n   *testNode
	mu  sync.Mutex
	sid string
}

func (l *liveSession) id(t *testing.T) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sid == "" {
		req := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(`{"ttl":"1h"}`))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		l.n.srv.ServeHTTP(rec, req)
		var s wire.Session
		if err := json.Unmarshal(rec.Body.Bytes(), &s); rec.Code != http.StatusCreated || err != nil {
			t.Fatalf("new session: %d %s", rec.Code, rec.Body)
		}
		l.sid = string(s.ID)
	}
	return l.sid
}

func (l *liveSession) closed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sid = ""
}
