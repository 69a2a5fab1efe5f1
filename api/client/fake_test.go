package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
)

// fakeCluster is an HTTP server standing in for lockd, for answers a real
// node gives only by chance (a revocation reported before the grant's own
// answer) or at a scale a test does not want (pages).
func fakeCluster(t *testing.T, h http.HandlerFunc) *client.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "{}") })
	mux.HandleFunc("/", h)
	c, err := client.NewWith([]string{fakeNode(t, mux)}, client.WithToken("fake"),
		client.WithRetryPolicy(client.RetryPolicy{MaxElapsed: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeNode starts an HTTP server standing in for a lockd node, closed at
// cleanup, and returns its URL.
func fakeNode(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeAPIError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":"fake"}}`, code)
}

// TestErrorsFollowTheList: every code of the API's list (wire.ErrorCodes)
// has its sentinel, which errors.Is matches; a code the list says may be
// retried is sent again (here, to the same node, which then answers),
// and every other is a definite answer, sent once.
func TestErrorsFollowTheList(t *testing.T) {
	for _, e := range wire.ErrorCodes() {
		want := client.Sentinel(e.Code)
		if want == nil {
			t.Errorf("the client has no sentinel for %s", e.Code)
			continue
		}
		var hits atomic.Int32
		c := fakeCluster(t, func(w http.ResponseWriter, r *http.Request) {
			if hits.Add(1) == 1 {
				writeAPIError(w, e.Status, e.Code)
				return
			}
			fmt.Fprint(w, `{"name":"x"}`)
		})
		_, err := c.GetLock(ctxFor(t, 10*time.Second), "x")
		var ae *client.Error
		switch n := hits.Load(); {
		case e.Retry && (err != nil || n != 2):
			t.Errorf("%d %s: %v after %d requests, want it retried once and answered", e.Status, e.Code, err, n)
		case !e.Retry && (!errors.Is(err, want) || !errors.As(err, &ae) || ae.HTTPStatus != e.Status || n != 1):
			t.Errorf("%d %s: %v after %d requests, want %v at once", e.Status, e.Code, err, n, want)
		}
	}
}

// TestListsFollowNextAfter: Locks and Sessions read every page, passing
// the previous answer's X-Next-After as after=.
func TestListsFollowNextAfter(t *testing.T) {
	pages := map[string][]string{"": {"a", "b"}, "b": {"c"}, "c": nil}
	var seen []string
	var mu sync.Mutex
	c := fakeCluster(t, func(w http.ResponseWriter, r *http.Request) {
		after, key := r.URL.Query().Get("after"), "name"
		mu.Lock()
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Path == "/v1/sessions" {
			key = "id"
		}
		items := []map[string]string{}
		for _, v := range pages[after] {
			items = append(items, map[string]string{key: v})
		}
		if len(items) > 0 {
			w.Header().Set("X-Next-After", items[len(items)-1][key])
		}
		_ = json.NewEncoder(w).Encode(items)
	})
	ctx := ctxFor(t, 10*time.Second)
	locks, err := c.Locks(ctx, "")
	if err != nil || len(locks) != 3 || locks[2].Name != "c" {
		t.Fatalf("locks %+v, %v", locks, err)
	}
	sessions, err := c.Sessions(ctx)
	if err != nil || len(sessions) != 3 || sessions[0].ID != "a" || sessions[2].ID != "c" {
		t.Fatalf("sessions %+v, %v", sessions, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 6 || !strings.Contains(seen[1], "after=b") || !strings.Contains(seen[0], "limit=") {
		t.Fatalf("requests %q", seen)
	}
}

// revocationFake is a lockd with one session whose keepalive answers
// list what revoked holds.
type revocationFake struct {
	mu        sync.Mutex
	revoked   []client.Revocation
	keepalive chan struct{} // a token per keepalive answered
}

func (f *revocationFake) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/sessions":
		fmt.Fprint(w, `{"id":"s1","ttl":"1s"}`)
	case strings.HasSuffix(r.URL.Path, "/keepalive"):
		f.mu.Lock()
		b, _ := json.Marshal(map[string]any{"id": "s1", "ttl": "1s", "revoked": f.revoked})
		f.mu.Unlock()
		_, _ = w.Write(b)
		select {
		case f.keepalive <- struct{}{}:
		default:
		}
	case r.URL.Path == "/v1/acquire":
		var body struct {
			RequestID string                  `json:"request_id"`
			Locks     []struct{ Name string } `json:"locks"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		token := map[string]int{"a": 7, "b": 8}[body.Locks[0].Name]
		fmt.Fprintf(w, `{"status":"granted","request_id":%q,"session":"s1","token":%d,"granted":[{"name":%q,"mode":"write","weight":1,"token":%d}]}`,
			body.RequestID, token, body.Locks[0].Name, token)
	default:
		fmt.Fprint(w, `{}`)
	}
}

// TestRevocationsFromKeepalives: a grant whose lock a keepalive already
// reported revoked is lost as soon as it is granted; a later revocation
// is lost on the next keepalive; an unrelated token is not; each loss is
// reported once however many keepalives repeat it.
func TestRevocationsFromKeepalives(t *testing.T) {
	f := &revocationFake{keepalive: make(chan struct{}, 1),
		revoked: []client.Revocation{{Name: "a", Token: 7, Index: 100}, {Name: "b", Token: 5, Index: 90}}}
	c := fakeCluster(t, f.serve)
	var calls atomic.Int32
	s := newSession(t, c, time.Second, client.WithOnLost(func(string, uint64, error) { calls.Add(1) }))
	ctx := ctxFor(t, 20*time.Second)
	nextKeepalive := func() {
		t.Helper()
		select {
		case <-f.keepalive:
		case <-ctx.Done():
			t.Fatal("no keepalive")
		}
	}
	// The revocation of a/7 is known before a/7 is granted. Keepalives
	// go one after another, so a second one served means the first
	// one's answer (the revocation) was handled.
	nextKeepalive()
	nextKeepalive()
	a, err := s.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(a.LostErr(), client.ErrRevoked) {
		t.Fatalf("a grant already revoked: LostErr %v", a.LostErr())
	}
	b, err := s.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	nextKeepalive()
	nextKeepalive()
	if b.LostErr() != nil {
		t.Fatalf("b (token 8) lost by the revocation of token 5: %v", b.LostErr())
	}
	f.mu.Lock()
	f.revoked = append(f.revoked, client.Revocation{Name: "b", Token: 8, Index: 120})
	f.mu.Unlock()
	select {
	case <-b.Lost():
	case <-ctx.Done():
		t.Fatal("b's revocation not noticed")
	}
	nextKeepalive()
	nextKeepalive()
	if n := calls.Load(); n != 2 {
		t.Fatalf("OnLost ran %d times, want 2 (a and b once each)", n)
	}
	if s.Err() != nil {
		t.Fatalf("a revocation ended the session: %v", s.Err())
	}
}

// A release answered 503 not_applied (the node did nothing: it found no
// leader, or is shutting down) is sent again. One answered a plain 503
// (its outcome unknown) asks for the request's state: "granted" means the
// first send did nothing, and it is sent again; "released" means it took
// effect, and nothing is sent again.
func TestReleaseOfUnknownOutcomeIsSettled(t *testing.T) {
	for _, tc := range []struct {
		notApplied bool
		state      string // of the request, after the lost answer
		releases   int32
	}{{true, "", 2}, {false, "granted", 2}, {false, "released", 1}} {
		var releases, gets atomic.Int32
		c := fakeCluster(t, func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/v1/sessions":
				fmt.Fprint(w, `{"id":"s1","ttl":"10s"}`)
			case r.URL.Path == "/v1/acquire":
				fmt.Fprint(w, `{"status":"granted","request_id":"r1","session":"s1","token":3,"granted":[{"name":"a","mode":"write","weight":1,"token":3}]}`)
			case r.URL.Path == "/v1/release" && releases.Add(1) == 1:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, `{"error":{"code":"no_leader","message":"node is shut down","not_applied":%v}}`, tc.notApplied)
			case r.URL.Path == "/v1/release":
				fmt.Fprint(w, `{"released":[{"name":"a"}]}`)
			case r.URL.Path == "/v1/requests/r1" && r.URL.Query().Get("session") == "s1":
				gets.Add(1)
				fmt.Fprintf(w, `{"request_id":"r1","session":"s1","status":%q,"token":3}`, tc.state)
			default:
				fmt.Fprint(w, `{}`)
			}
		})
		s := newSession(t, c, 10*time.Second)
		ctx := ctxFor(t, 10*time.Second)
		g, err := s.Lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, g); err != nil || releases.Load() != tc.releases {
			t.Errorf("%+v: release %v after %d sends, want success after %d", tc, err, releases.Load(), tc.releases)
		}
		if asked := gets.Load() > 0; asked == tc.notApplied {
			t.Errorf("%+v: asked for the request's state: %v", tc, asked)
		}
	}
}

// A release whose answer was lost, and whose request's state then says
// nothing (here: not found), ends with the outcome unknown after one
// look; it used to ask again and again without end, its error growing
// with every look, until the process ran out of memory (a jepsen run's
// harness, after a leader's leave).
func TestReleaseOfUnknownOutcomeUnsettledIsUnknown(t *testing.T) {
	var releases, gets atomic.Int32
	c := fakeCluster(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/sessions":
			fmt.Fprint(w, `{"id":"s1","ttl":"10s"}`)
		case r.URL.Path == "/v1/acquire":
			fmt.Fprint(w, `{"status":"granted","request_id":"r1","session":"s1","token":3,"granted":[{"name":"a","mode":"write","weight":1,"token":3}]}`)
		case r.URL.Path == "/v1/release":
			releases.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"no_leader","message":"leadership lost"}}`)
		case r.URL.Path == "/v1/requests/r1" && gets.Add(1) == 1:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"request_not_found","message":"no request r1"}}`)
		case r.URL.Path == "/v1/requests/r1": // a second look ends the loop it would be in
			fmt.Fprint(w, `{"request_id":"r1","session":"s1","status":"released","token":3}`)
		default:
			fmt.Fprint(w, `{}`)
		}
	})
	s := newSession(t, c, 10*time.Second)
	ctx := ctxFor(t, 10*time.Second)
	g, err := s.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Release(ctx, g)
	if !errors.Is(err, client.ErrUnknownOutcome) || releases.Load() != 1 || gets.Load() != 1 {
		t.Fatalf("release %v after %d sends and %d looks, want an unknown outcome after one of each", err, releases.Load(), gets.Load())
	}
}

// An acquire whose answer is lost re-attaches with GET /v1/requests/{id}
// naming its session: request ids are each session's own, and another
// session of the same token may use the same one.
func TestReattachNamesTheSession(t *testing.T) {
	var gets atomic.Int32
	c := fakeCluster(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/sessions":
			fmt.Fprint(w, `{"id":"s1","ttl":"10s"}`)
		case r.URL.Path == "/v1/acquire":
			writeAPIError(w, http.StatusServiceUnavailable, wire.CodeNoLeader) // the outcome is unknown
		case strings.HasPrefix(r.URL.Path, "/v1/requests/") && r.Method == http.MethodGet:
			gets.Add(1)
			if r.URL.Query().Get("session") != "s1" {
				writeAPIError(w, http.StatusBadRequest, wire.CodeInvalidRequest) // as for an id two sessions use
				return
			}
			id := strings.TrimPrefix(r.URL.Path, "/v1/requests/")
			fmt.Fprintf(w, `{"request_id":%q,"session":"s1","status":"granted","token":3,"granted":[{"name":"a","mode":"write","weight":1,"token":3}]}`, id)
		default:
			fmt.Fprint(w, `{}`)
		}
	})
	s := newSession(t, c, 10*time.Second)
	g, err := s.Lock(ctxFor(t, 10*time.Second), "a")
	if err != nil || g.Token != 3 || gets.Load() == 0 {
		t.Fatalf("lock after a lost answer: %+v, %v (%d re-attaches)", g, err, gets.Load())
	}
}

// TestObserveDeliversEachLeaderOnceInTokenOrder: Observe follows the
// version (each read's index is the last version read), skips an answer
// from behind that version, the same leader again (a wait that ran out),
// "no leader" and a smaller token than one delivered, retries a node
// without a leader, and delivers the rest: a new value under the same
// token, a larger token.
func TestObserveDeliversEachLeaderOnceInTokenOrder(t *testing.T) {
	leader := func(v int, value string, token int) string {
		return fmt.Sprintf(`{"name":"x","version":%d,"leader":{"value":%q,"token":%d},"candidates":0}`, v, value, token)
	}
	answers := []string{
		leader(5, "a", 3),
		leader(5, "a", 3), // the wait ran out
		"no_leader",       // retried
		leader(4, "old", 2),
		leader(7, "b", 3),
		`{"name":"x","version":8,"leader":null,"candidates":0}`,
		leader(9, "z", 2),
		leader(10, "c", 9),
	}
	wantIndex := []string{"0", "5", "5", "5", "5", "7", "8", "9", "10"}
	var mu sync.Mutex
	var indexes []string
	c := fakeCluster(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/elections/x" || r.URL.Query().Get("wait") == "" {
			writeAPIError(w, http.StatusBadRequest, "invalid_request")
			return
		}
		mu.Lock()
		n := len(indexes)
		indexes = append(indexes, r.URL.Query().Get("index"))
		mu.Unlock()
		if n >= len(answers) {
			<-r.Context().Done() // nothing changes any more
			return
		}
		if answers[n] == "no_leader" {
			writeAPIError(w, http.StatusServiceUnavailable, "no_leader")
			return
		}
		fmt.Fprint(w, answers[n])
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := c.Election("x").Observe(ctx)
	var got []string
	for range 3 {
		select {
		case l := <-ch:
			got = append(got, fmt.Sprintf("%s/%d", l.Value, l.Token))
		case <-time.After(10 * time.Second):
			t.Fatalf("observed %q, then nothing", got)
		}
	}
	if want := []string{"a/3", "b/3", "c/9"}; !slices.Equal(got, want) {
		t.Fatalf("observed %q, want %q", got, want)
	}
	eventually(t, 5*time.Second, "the read after the last answer", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(indexes) == len(wantIndex), fmt.Sprint(indexes)
	})
	cancel()
	select {
	case l, ok := <-ch:
		if ok {
			t.Fatalf("observed %+v after the last change", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the channel stayed open after ctx ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(indexes, wantIndex) {
		t.Fatalf("indexes read %q, want %q", indexes, wantIndex)
	}
}
