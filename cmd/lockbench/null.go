package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// serveNull serves the calls a lock benchmark makes (POST /v1/sessions,
// /v1/acquire with a wait, /v1/release, DELETE /v1/sessions/ID) from one
// in-memory table, with no consensus, no disk and no checks beyond one
// holder per name and a FIFO of waiters, on every address until SIGINT or
// SIGTERM. It is the ceiling: what the load generator and HTTP alone allow
// on this machine, against which the cluster's numbers (and a goal) can be
// judged.
func serveNull(addrs []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	handler := nullHandler()
	errs := make(chan error, len(addrs))
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("null server: %w", err)
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() { errs <- srv.Serve(ln) }()
		defer srv.Close()
	}
	fmt.Printf("lockbench: null server (no consensus, no disk) on %s until interrupted\n", strings.Join(addrs, ","))
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return fmt.Errorf("null server: %w", err)
	}
}

// nullHandler is the null server's API over a fresh table.
func nullHandler() http.Handler { return newNullTable().handler() }

// handler is the null server's API over t.
func (t *nullTable) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", t.session)
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("POST /v1/acquire", t.acquire)
	mux.HandleFunc("POST /v1/release", t.release)
	return mux
}

// nullTable is one exclusive holder per name and a FIFO of waiters.
type nullTable struct {
	sessions atomic.Int64
	mu       sync.Mutex
	holders  map[string]string          // name -> session
	waiters  map[string][]chan struct{} // name -> woken when it is theirs
}

func newNullTable() *nullTable {
	return &nullTable{holders: map[string]string{}, waiters: map[string][]chan struct{}{}}
}

type nullRequest struct {
	Session string `json:"session"`
	Name    string `json:"name"`
	Wait    string `json:"wait"`
	Locks   []struct {
		Name string `json:"name"`
	} `json:"locks"`
}

func (t *nullTable) session(w http.ResponseWriter, _ *http.Request) {
	id := strconv.FormatInt(t.sessions.Add(1), 10)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q}`, id)
}

func (t *nullTable) acquire(w http.ResponseWriter, r *http.Request) {
	var req nullRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Session == "" || len(req.Locks) != 1 {
		http.Error(w, `{"error":"bad_request"}`, http.StatusBadRequest)
		return
	}
	wait, err := time.ParseDuration(req.Wait)
	if err != nil && req.Wait != "" {
		http.Error(w, `{"error":"bad_request"}`, http.StatusBadRequest)
		return
	}
	name := req.Locks[0].Name
	if err := t.take(r.Context(), name, req.Session, wait); err != nil {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error":"timeout"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"status":"granted"}`)
}

// take makes session the holder of name, waiting in line up to wait.
func (t *nullTable) take(ctx context.Context, name, session string, wait time.Duration) error {
	t.mu.Lock()
	if _, held := t.holders[name]; !held {
		t.holders[name] = session
		t.mu.Unlock()
		return nil
	}
	mine := make(chan struct{})
	t.waiters[name] = append(t.waiters[name], mine)
	t.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-mine: // release made us the holder
		t.mu.Lock()
		t.holders[name] = session
		t.mu.Unlock()
		if ctx.Err() != nil { // the client is gone: nobody would release it
			t.free(name, session)
			return ctx.Err()
		}
		return nil
	case <-timer.C:
	case <-ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-mine: // granted while giving up: pass it on
		t.handOn(name)
	default:
		t.waiters[name] = removeWaiter(t.waiters[name], mine)
	}
	return errors.New("timeout")
}

func (t *nullTable) release(w http.ResponseWriter, r *http.Request) {
	var req nullRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Session == "" || req.Name == "" {
		http.Error(w, `{"error":"bad_request"}`, http.StatusBadRequest)
		return
	}
	t.free(req.Name, req.Session)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"released":true}`)
}

// free releases name if session holds it.
func (t *nullTable) free(name, session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.holders[name] == session { // never "": requests without a session are refused
		t.handOn(name)
	}
}

// handOn gives name to its first waiter, or frees it; t.mu is held. The
// holder entry stays until the woken waiter claims it, so nobody barges.
func (t *nullTable) handOn(name string) {
	line := t.waiters[name]
	if len(line) == 0 {
		delete(t.holders, name)
		delete(t.waiters, name)
		return
	}
	t.holders[name] = "" // reserved for the waiter
	t.waiters[name] = line[1:]
	close(line[0])
}

func removeWaiter(line []chan struct{}, c chan struct{}) []chan struct{} {
	for i, w := range line {
		if w == c {
			return append(line[:i:i], line[i+1:]...)
		}
	}
	return line
}
