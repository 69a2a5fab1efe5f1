package main

import (
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
