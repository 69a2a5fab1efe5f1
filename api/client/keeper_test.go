package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
)

// keepaliveCounter counts the keepalive requests a client sends: those of
// one session and the batched ones, with the sessions they name.
type keepaliveCounter struct {
	rt                         http.RoundTripper
	singles, batches, batchMax atomic.Int64
	batched                    atomic.Int64 // sessions named by batches
}

func (k *keepaliveCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case r.URL.Path == "/v1/sessions/keepalive":
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var req wire.KeepAlivesRequest
		_ = json.Unmarshal(b, &req)
		k.batches.Add(1)
		k.batched.Add(int64(len(req.Sessions)))
		for n := int64(len(req.Sessions)); ; {
			m := k.batchMax.Load()
			if n <= m || k.batchMax.CompareAndSwap(m, n) {
				break
			}
		}
	case strings.HasSuffix(r.URL.Path, "/keepalive"):
		k.singles.Add(1)
	}
	return k.rt.RoundTrip(r)
}

// A client's sessions that fall due together are kept alive by one
// request: 60 sessions live through two TTLs on far fewer requests than
// keepalives; one deleted behind the client's back is lost alone, with
// ErrSessionNotFound, and the others live on.
func TestKeepalivesAreBatched(t *testing.T) {
	const ttl = 3 * time.Second
	n, _ := devFixture(t, nil)
	counter := &keepaliveCounter{rt: http.DefaultTransport}
	c, err := client.NewWith([]string{n.Addr}, client.WithHTTPClient(&http.Client{Transport: counter}))
	if err != nil {
		t.Fatal(err)
	}
	sessions := make([]*client.Session, 60)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() { sessions[i] = newSession(t, c, ttl) })
	}
	wg.Wait()
	gone := sessions[0]
	if _, err := c.DeleteSession(ctxFor(t, 10*time.Second), gone.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gone.Done():
	case <-time.After(2 * ttl):
		t.Fatal("a session deleted on the server was not reported lost")
	}
	if err := gone.Err(); !errors.Is(err, client.ErrSessionNotFound) {
		t.Fatalf("deleted session's Err = %v, want ErrSessionNotFound", err)
	}
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(ttl / 10) {
		for _, s := range sessions[1:] {
			if err := s.Err(); err != nil {
				t.Fatalf("session %s lost: %v", s.ID(), err)
			}
		}
	}
	infos, err := c.Sessions(ctxFor(t, 10*time.Second))
	if err != nil || len(infos) != len(sessions)-1 {
		t.Fatalf("the cluster has %d sessions (%v), want %d", len(infos), err, len(sessions)-1)
	}
	sent := counter.singles.Load() + counter.batched.Load()
	requests := counter.singles.Load() + counter.batches.Load()
	t.Logf("%d keepalives in %d requests (%d batched, largest %d)", sent, requests, counter.batches.Load(), counter.batchMax.Load())
	if counter.batchMax.Load() < 2 || requests*2 > sent {
		t.Fatalf("%d keepalives in %d requests, largest batch %d: not batched", sent, requests, counter.batchMax.Load())
	}
}

// A batch answers each session as its own keepalive would; a node older
// than the batched call (404 not_found) gets each session's own call.
func TestKeepAliveTogether(t *testing.T) {
	var singles atomic.Int32
	older := fakeNode(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/status":
			fmt.Fprint(w, `{}`)
		case r.URL.Path == "/v1/sessions/gone/keepalive":
			singles.Add(1)
			writeAPIError(w, http.StatusNotFound, wire.CodeSessionNotFound)
		case strings.HasSuffix(r.URL.Path, "/keepalive") && r.URL.Path != "/v1/sessions/keepalive":
			singles.Add(1)
			fmt.Fprint(w, `{"ttl":"10s","revoked":[]}`)
		default:
			writeAPIError(w, http.StatusNotFound, wire.CodeNotFound)
		}
	}))
	n, _ := devFixture(t, nil)
	for _, tc := range []struct {
		name, addr  string
		wantSingles int32
	}{{"batched", n.Addr, 0}, {"older node", older, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.NewWith([]string{tc.addr}, client.WithToken(""))
			if err != nil {
				t.Fatal(err)
			}
			live := "live"
			if tc.addr == n.Addr {
				live = newSession(t, c, 10*time.Second).ID()
			}
			singles.Store(0)
			errs := c.KeepAliveTogether(ctxFor(t, 10*time.Second), live, "gone")
			if errs[0] != nil || !errors.Is(errs[1], client.ErrSessionNotFound) {
				t.Fatalf("errors %v, want nil and ErrSessionNotFound", errs)
			}
			var ae *client.Error
			if !errors.As(errs[1], &ae) || ae.HTTPStatus != http.StatusNotFound {
				t.Fatalf("%#v: want the *Error of a 404", errs[1])
			}
			if got := singles.Load(); got != tc.wantSingles {
				t.Fatalf("%d single keepalives, want %d", got, tc.wantSingles)
			}
		})
	}
}

// A node that turns a call away for load (503 with Retry-After) gets the
// retry no sooner than it asked, and the answer's Retry-After is on the
// *Error.
func TestRetryAfterIsHonoured(t *testing.T) {
	var mu sync.Mutex
	var asked []time.Time
	node := fakeNode(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/check" {
			fmt.Fprint(w, `{}`)
			return
		}
		mu.Lock()
		asked = append(asked, time.Now())
		n := len(asked)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"no_leader","message":"busy","not_applied":true}}`)
			return
		}
		fmt.Fprint(w, `{"valid":true,"token":7}`)
	}))
	c, err := client.NewWith([]string{node}, client.WithToken(""))
	if err != nil {
		t.Fatal(err)
	}
	if valid, _, err := c.Check(ctxFor(t, 30*time.Second), "jobs/x", 7); err != nil || !valid {
		t.Fatalf("Check: %v, %v", valid, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[1].Sub(asked[0]) < time.Second {
		t.Fatalf("asked %d times, the retry %v after a Retry-After of 1s", len(asked), asked[len(asked)-1].Sub(asked[0]))
	}
}

// A batched keepalive still in flight when its sessions close (here to
// a node that hangs) ends with them: once both Closes return, the keeper
// makes no call, so nothing the client does for a closed session
// outlives it. It used to retry on until the sessions' deadline, and log
// into a test that had ended.
func TestKeepAliveEndsWithItsSessions(t *testing.T) {
	var ids atomic.Int32
	hung := make(chan struct{}, 1)
	c := fakeCluster(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/sessions":
			fmt.Fprintf(w, `{"id":"s%d","ttl":"3s"}`, ids.Add(1))
		case "/v1/sessions/keepalive":
			select {
			case hung <- struct{}{}:
			default:
			}
			// A node that hangs, until the client gives up (the body
			// read, the server notices the connection's end).
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		default:
			fmt.Fprint(w, `{}`)
		}
	})
	a, b := newSession(t, c, 3*time.Second), newSession(t, c, 3*time.Second)
	select {
	case <-hung:
	case <-time.After(10 * time.Second):
		t.Fatal("no batched keepalive was sent within 10 s")
	}
	ctx := ctxFor(t, 10*time.Second)
	for _, s := range []*client.Session{a, b} {
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.KeepAliveCalls(); n != 0 {
		t.Fatalf("%d keepalive calls go on after their sessions closed", n)
	}
}
