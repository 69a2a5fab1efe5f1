package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// fakeNodes is a fake cluster for --keepalive: sessions shared by every
// node, a leader that kill moves to the next node, and /metrics that
// grows by half a core-second at each read.
type fakeNodes struct {
	t        *testing.T
	mu       sync.Mutex
	srvs     []*httptest.Server
	addrs    []string
	leader   int
	dead     map[int]bool
	created  int
	batches  int // batched keepalives
	live     map[string]bool
	kept     map[string]int // keepalives per session
	keptBy   map[string]int // keepalives per node address
	cpuReads map[int]int
}

func newFakeNodes(t *testing.T, n int) *fakeNodes {
	f := &fakeNodes{t: t, dead: map[int]bool{}, live: map[string]bool{}, kept: map[string]int{}, keptBy: map[string]int{}, cpuReads: map[int]int{}}
	for i := range n {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(i, w, r) }))
		t.Cleanup(srv.Close)
		f.srvs = append(f.srvs, srv)
		f.addrs = append(f.addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	return f
}

func (f *fakeNodes) serve(node int, w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead[node] {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions":
		f.created++
		id := fmt.Sprintf("s%d", f.created)
		f.live[id] = true
		fmt.Fprintf(w, `{"id":%q}`, id)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions/keepalive":
		var req wire.KeepAlivesRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.batches++
		out := wire.KeepAlivesResponse{Sessions: make([]wire.KeptSession, len(req.Sessions))}
		for i, id := range req.Sessions {
			out.Sessions[i] = wire.KeptSession{ID: id, TTL: wire.Duration(time.Second)}
			f.keptOne(node, id)
		}
		_ = json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/keepalive"):
		f.keptOne(node, strings.Split(r.URL.Path, "/")[3])
		fmt.Fprint(w, `{"ttl":"1s"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions":
		var ids []string
		for id := range f.live {
			if r.URL.Query().Get("after") == "" {
				ids = append(ids, fmt.Sprintf(`{"id":%q}`, id))
			}
		}
		fmt.Fprintf(w, "[%s]", strings.Join(ids, ","))
	case r.Method == http.MethodGet && r.URL.Path == "/v1/status":
		fmt.Fprintf(w, `{"leader":{"http_addr":%q}}`, f.addrs[f.leader])
	case r.Method == http.MethodDelete:
		delete(f.live, strings.Split(r.URL.Path, "/")[3])
	case r.URL.Path == "/metrics":
		f.cpuReads[node]++
		fmt.Fprintf(w, "process_cpu_seconds_total %g\nprocess_resident_memory_bytes 2e+08\ngo_memstats_heap_inuse_bytes 1e+08\n",
			0.5*float64(f.cpuReads[node]))
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// keptOne counts a keepalive of session id at node; f.mu is held.
func (f *fakeNodes) keptOne(node int, id string) {
	if node != f.leader {
		f.t.Errorf("keepalive to %s, not the leader %s", f.addrs[node], f.addrs[f.leader])
	}
	f.kept[id]++
	f.keptBy[f.addrs[node]]++
}

// kill makes the node at addr refuse everything and the next node lead.
func (f *fakeNodes) kill(addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(f.addrs, addr)
	if i != f.leader {
		f.t.Errorf("killed %s, not the leader %s", addr, f.addrs[f.leader])
	}
	f.dead[i] = true
	f.leader = (i + 1) % len(f.addrs)
	return nil
}

// TestKeepalives: every session --keepalive opens is kept alive, each
// node's CPU comes from its process_cpu_seconds_total, no session is
// lost, and every session is closed at the end; with --batch, in fewer
// requests than keepalives.
func TestKeepalives(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			f := newFakeNodes(t, 1)
			node := f.addrs[0]
			r, err := keepalives(api{}, []string{node}, []string{node}, keepaliveConfig{n: 20, conns: 4, ttl: 300 * time.Millisecond,
				warmup: 100 * time.Millisecond, d: time.Second, batch: batch})
			if err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.created != 20 || len(f.live) != 0 || len(f.kept) != 20 {
				t.Fatalf("created %d, kept alive %d, left open %d sessions; want 20, 20, 0", f.created, len(f.kept), len(f.live))
			}
			if r.sent == 0 || r.errors != 0 || r.lost != 0 || len(r.lat) != int(r.sent) {
				t.Fatalf("sent %d keepalives (%d latencies), %d errors, %d lost", r.sent, len(r.lat), r.errors, r.lost)
			}
			if batched := f.batches > 0 && r.requests < r.sent; batched != batch || !batch && r.requests != r.sent {
				t.Fatalf("%d keepalives in %d requests (%d batched), with --batch %v", r.sent, r.requests, f.batches, batch)
			}
			if got := r.cpu[node]; got < 49 || got > 51 {
				t.Fatalf("cpu %.1f%%, want 50%% (0.5 core-seconds over 1s)", got)
			}
		})
	}
}

// TestKeepalivesFailover: --failover kills the leader every node names,
// the keepalives follow the new leader, and every session is kept alive
// again there; none is lost.
func TestKeepalivesFailover(t *testing.T) {
	f := newFakeNodes(t, 3)
	r, err := keepalives(api{}, []string{f.addrs[0]}, f.addrs, keepaliveConfig{n: 30, conns: 4, ttl: 300 * time.Millisecond,
		warmup: 100 * time.Millisecond, d: 2 * time.Second, kill: f.kill})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fo := r.failover
	if fo == nil || fo.killed != f.addrs[0] || fo.leader != f.addrs[1] {
		t.Fatalf("failover %+v; want %s killed and %s leading", fo, f.addrs[0], f.addrs[1])
	}
	if fo.rekeptN != 30 || fo.rekept <= 0 || r.lost != 0 {
		t.Fatalf("%d sessions kept alive again (after %v), %d lost; want 30 and 0", fo.rekeptN, fo.rekept, r.lost)
	}
	if f.keptBy[f.addrs[1]] < 30 {
		t.Fatalf("the new leader had %d keepalives, want one per session at least", f.keptBy[f.addrs[1]])
	}
	if _, ok := r.cpu[f.addrs[0]]; ok {
		t.Fatalf("cpu reported for the killed node: %v", r.cpu)
	}
}

// TestKeepalivesPausedLeader: --failover --pause pauses the leader
// instead, resumes it once the others lead, and waits until it names the
// new leader too; the keepalives stay with the new leader and none is
// lost.
func TestKeepalivesPausedLeader(t *testing.T) {
	f := newFakeNodes(t, 3)
	resumed := ""
	resume := func(addr string) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		resumed = addr
		f.dead[slices.Index(f.addrs, addr)] = false
		return nil
	}
	r, err := keepalives(api{}, []string{f.addrs[0]}, f.addrs, keepaliveConfig{n: 30, conns: 4, ttl: 300 * time.Millisecond,
		warmup: 100 * time.Millisecond, d: 2 * time.Second, kill: f.kill, resume: resume, pausedFor: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fo := r.failover
	if fo == nil || !fo.paused || fo.killed != f.addrs[0] || resumed != f.addrs[0] || fo.leader != f.addrs[1] {
		t.Fatalf("failover %+v, resumed %q; want %s paused and resumed, %s leading", fo, resumed, f.addrs[0], f.addrs[1])
	}
	if fo.rekeptN != 30 || r.lost != 0 {
		t.Fatalf("%d sessions kept alive again, %d lost; want 30 and 0", fo.rekeptN, r.lost)
	}
	if _, ok := r.cpu[f.addrs[0]]; !ok {
		t.Fatalf("no cpu reported for the resumed node: %v", r.cpu)
	}
}

// TestHold: --hold takes every name once, at most 64 per acquire and
// 5,000 per session, and reads each node's memory from /metrics.
func TestHold(t *testing.T) {
	var (
		mu       sync.Mutex
		sessions int
		names    = map[string]string{} // name -> session
		perSess  = map[string]int{}
		maxBatch int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/v1/sessions":
			sessions++
			fmt.Fprintf(w, `{"id":"s%d"}`, sessions)
		case "/v1/acquire":
			var body struct {
				Session string `json:"session"`
				Locks   []struct {
					Name string `json:"name"`
				} `json:"locks"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				t.Errorf("acquire body: %v", err)
			}
			maxBatch = max(maxBatch, len(body.Locks))
			for _, l := range body.Locks {
				if _, dup := names[l.Name]; dup {
					t.Errorf("%s taken twice", l.Name)
				}
				names[l.Name] = body.Session
				perSess[body.Session]++
			}
			fmt.Fprint(w, `{"status":"granted"}`)
		case "/metrics":
			fmt.Fprint(w, "process_resident_memory_bytes 2e+08\ngo_memstats_heap_inuse_bytes 1.5e+08\n")
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	node := strings.TrimPrefix(srv.URL, "http://")
	r, err := hold(api{}, []string{node}, []string{node}, 12000, 8)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if r.locks != 12000 || r.errors != 0 || len(names) != 12000 {
		t.Fatalf("held %d (%d refused), %d distinct names; want 12000", r.locks, r.errors, len(names))
	}
	if sessions != 3 || maxBatch != 64 {
		t.Fatalf("%d sessions, largest acquire %d names; want 3 and 64", sessions, maxBatch)
	}
	for s, n := range perSess {
		if n > holdsPerSession {
			t.Errorf("session %s holds %d, over %d", s, n, holdsPerSession)
		}
	}
	if m := r.memory[node]; m.rss != 2e8 || m.heap != 1.5e8 {
		t.Fatalf("memory %+v", m)
	}
}
