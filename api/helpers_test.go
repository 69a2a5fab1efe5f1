package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/raftnode"
)

// testNode is one real raftnode behind the real API handler.
type testNode struct {
	t    testing.TB
	id   string
	raft string // raft address
	node *raftnode.Node
	srv  *api.Server
	ts   *httptest.Server
	once sync.Once
}

// nodeOptions adjust a test node's API config.
type nodeOptions struct {
	api  func(*api.Config)
	raft func(*raftnode.Config)
	dir  string // the data dir; "" for a new temporary one
}

// peers maps node ids to HTTP addresses for forwarding in multi-node tests.
type peers struct {
	mu sync.Mutex
	m  map[string]string
}

func (p *peers) set(id, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]string{}
	}
	p.m[id] = addr
}

func (p *peers) get(id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.m[id]
	return a, ok
}

// startNode opens a raftnode on a temporary data dir and serves the API for
// it over httptest. It does not bootstrap.
func startNode(t testing.TB, id string, ps *peers, opts nodeOptions) *testNode {
	t.Helper()
	if ps == nil {
		ps = &peers{}
	}
	n := &testNode{t: t, id: id}
	logger := hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Warn, Output: io.Discard})
	if testing.Verbose() {
		logger = hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Info})
	}
	dir := opts.dir
	if dir == "" {
		dir = t.TempDir()
	}
	// The node binds port 0 itself and keeps it: a port found free by a
	// listener closed before Open could be taken meanwhile (by another
	// package's connection, whose source ports come from the same range).
	rcfg := raftnode.Config{ID: id, DataDir: dir, RaftBind: "127.0.0.1:0",
		Logger: logger, Timing: lockdtest.Timing(0.5)} // heartbeats of 500 ms: a loaded CI machine starves goroutines for longer than 100 ms
	if opts.raft != nil {
		opts.raft(&rcfg)
	}
	node, err := raftnode.Open(rcfg)
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	n.node, n.raft = node, node.RaftAddr()
	cfg := api.Config{Node: node, Logger: logger, PeerHTTP: ps.get, CancelGrace: 300 * time.Millisecond}
	if opts.api != nil {
		opts.api(&cfg)
	}
	n.srv, err = api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.ts = httptest.NewServer(n.srv)
	ps.set(id, strings.TrimPrefix(n.ts.URL, "http://"))
	t.Cleanup(n.stop)
	return n
}

func (n *testNode) stop() {
	n.once.Do(func() {
		n.srv.Close()
		n.ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.node.Shutdown(ctx)
	})
}

// singleNode starts one node that bootstraps itself and leads.
func singleNode(t testing.TB, opts nodeOptions) *testNode {
	t.Helper()
	n := startNode(t, "n1", nil, opts)
	if err := n.node.Bootstrap([]raftnode.Server{{ID: n.id, Addr: n.raft, Voter: true}}); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	waitFor(t, 10*time.Second, "a leader", func() bool { return n.node.Status().State == "leader" })
	return n
}

// threeNodes starts three nodes that bootstrap a cluster together and
// returns them, the leader first.
func threeNodes(t testing.TB, opts nodeOptions) []*testNode {
	t.Helper()
	ps := &peers{}
	ns := []*testNode{startNode(t, "n1", ps, opts), startNode(t, "n2", ps, opts), startNode(t, "n3", ps, opts)}
	var servers []raftnode.Server
	for _, n := range ns {
		servers = append(servers, raftnode.Server{ID: n.id, Addr: n.raft, Voter: true})
	}
	if err := ns[0].node.Bootstrap(servers); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "a leader", func() bool {
		for i, n := range ns {
			if n.node.Status().State == "leader" {
				ns[0], ns[i] = ns[i], ns[0]
				return true
			}
		}
		return false
	})
	return ns
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// resp is one HTTP answer.
type resp struct {
	status int
	body   []byte
	header http.Header
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body)) }

// do sends body (a string is sent as is, anything else as JSON; nil sends
// nothing) and returns the answer. It is safe in goroutines: a transport
// failure is reported with Errorf and answers status 0.
func (n *testNode) do(method, path string, body any) resp {
	n.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			n.t.Errorf("marshal: %v", err)
			return resp{}
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, n.ts.URL+path, rd)
	if err != nil {
		n.t.Errorf("%s %s: %v", method, path, err)
		return resp{}
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Errorf("%s %s: %v", method, path, err)
		return resp{}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		n.t.Errorf("%s %s: read: %v", method, path, err)
	}
	return resp{status: res.StatusCode, body: b, header: res.Header}
}

// must sends a request that must answer want, and decodes the body into out.
func (n *testNode) must(want int, method, path string, body, out any) resp {
	n.t.Helper()
	r := n.do(method, path, body)
	if r.status != want {
		n.t.Fatalf("%s %s: got %s, want status %d", method, path, r, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			n.t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
	return r
}

// mustErr sends a request that must fail with status and code, and checks
// the error body is exactly {"error":{"code","message"}}.
func (n *testNode) mustErr(status int, code, method, path string, body any) string {
	n.t.Helper()
	r := n.do(method, path, body)
	return checkErr(n.t, r, status, code, method+" "+path)
}

func checkErr(t testing.TB, r resp, status int, code, what string) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: got %s, want %d %s", what, r, status, code)
	}
	var raw map[string]map[string]any
	if err := json.Unmarshal(r.body, &raw); err != nil || len(raw) != 1 || raw["error"] == nil {
		t.Fatalf("%s: error body %s is not {\"error\":{\"code\",\"message\"}}", what, r.body)
	}
	keys := len(raw["error"])
	if raw["error"]["not_applied"] == true && status == http.StatusServiceUnavailable {
		keys-- // the one optional field, on a 503
	}
	if keys != 2 {
		t.Fatalf("%s: error body %s is not {\"error\":{\"code\",\"message\"}}", what, r.body)
	}
	if got := raw["error"]["code"]; got != code {
		t.Fatalf("%s: got code %v (%s), want %s", what, got, r.body, code)
	}
	if !slices.Contains(wire.ErrorCodes(), wireCode(code, status)) {
		t.Fatalf("%s: %d %s is not in the API's list of codes (wire.ErrorCodes)", what, status, code)
	}
	msg, _ := raw["error"]["message"].(string)
	if msg == "" {
		t.Fatalf("%s: empty message", what)
	}
	return msg
}

// session creates a session and returns its id.
func (n *testNode) session(body any) string {
	n.t.Helper()
	if body == nil {
		body = map[string]any{"ttl": "30s"}
	}
	var s wire.Session
	n.must(http.StatusCreated, "POST", "/v1/sessions", body, &s)
	return string(s.ID)
}

// acquire asks for one lock and returns the raw answer.
func (n *testNode) acquire(sess, name, mode, wait, requestID string) resp {
	n.t.Helper()
	body := map[string]any{"session": sess, "locks": []map[string]any{{"name": name, "mode": mode}}, "wait": wait}
	if requestID != "" {
		body["request_id"] = requestID
	}
	return n.do("POST", "/v1/acquire", body)
}

func (n *testNode) mustGrant(sess, name, mode string) wire.AcquireResponse {
	n.t.Helper()
	r := n.acquire(sess, name, mode, "0s", "")
	return decodeGrant(n.t, r)
}

func decodeGrant(t testing.TB, r resp) wire.AcquireResponse {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("acquire: got %s, want 200 granted", r)
	}
	var g wire.AcquireResponse
	if err := json.Unmarshal(r.body, &g); err != nil {
		t.Fatal(err)
	}
	if g.Status != "granted" || g.Token == 0 || len(g.Granted) == 0 {
		t.Fatalf("acquire: unexpected grant %s", r.body)
	}
	return g
}

func (n *testNode) status() wire.StatusResponse {
	n.t.Helper()
	var st wire.StatusResponse
	n.must(http.StatusOK, "GET", "/v1/status", nil, &st)
	return st
}

// async runs fn in a goroutine and returns a channel with its answer.
func async(fn func() resp) <-chan resp {
	ch := make(chan resp, 1)
	go func() { ch <- fn() }()
	return ch
}

func recv(t testing.TB, ch <-chan resp, d time.Duration, what string) resp {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
	return resp{}
}

// waitPending waits until the table shows request id pending (queued).
func (n *testNode) waitPending(id string) {
	n.t.Helper()
	waitFor(n.t, 10*time.Second, "request "+id+" to be pending", func() bool {
		r := n.do("GET", "/v1/requests/"+id+"?stale", nil)
		return r.status == http.StatusOK && strings.Contains(string(r.body), `"status":"pending"`)
	})
}
