package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestKeepalives: every session --keepalive opens is kept alive, each
// node's CPU comes from its process_cpu_seconds_total, and every session
// is closed at the end.
func TestKeepalives(t *testing.T) {
	var (
		mu       sync.Mutex
		created  int
		kept     = map[string]int{}
		deleted  int
		cpuReads int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions":
			created++
			fmt.Fprintf(w, `{"id":"s%d"}`, created)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/keepalive"):
			kept[strings.Split(r.URL.Path, "/")[3]]++
			fmt.Fprint(w, `{"ttl":"1s"}`)
		case r.Method == http.MethodDelete:
			deleted++
		case r.URL.Path == "/metrics":
			cpuReads++ // 0.5 core-seconds more at each read
			fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", 0.5*float64(cpuReads))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	node := strings.TrimPrefix(srv.URL, "http://")
	r, err := keepalives(api{}, []string{node}, []string{node}, 20, 4, 300*time.Millisecond, 100*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if created != 20 || deleted != 20 || len(kept) != 20 {
		t.Fatalf("created %d, kept alive %d, deleted %d sessions; want 20 each", created, len(kept), deleted)
	}
	if r.sent == 0 || r.errors != 0 {
		t.Fatalf("sent %d keepalives, %d errors", r.sent, r.errors)
	}
	if got := r.cpu[node]; got < 49 || got > 51 {
		t.Fatalf("cpu %.1f%%, want 50%% (0.5 core-seconds over 1s)", got)
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
