//go:build linux

package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/cmd/lockd/lockdtest"
)

// noQuorum is the 503 of a node that reaches too few voters to elect a
// leader.
const noQuorum = "no leader: 1 of 3 voters reachable (n1); a majority of 2 is needed"

func writeNoQuorum(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":%q,"not_applied":true,"quorum_lost":true}}`, wire.CodeNoLeader, noQuorum)
}

// The leader the cluster names takes no connection (a killed container):
// Check fails over after the connect timeout (1s), not after the attempt
// timeout (30s here), and the dead node is not asked for the leader
// again while it is suspect.
func TestCheckFailsOverFromALeaderThatTakesNoConnection(t *testing.T) {
	t.Parallel()
	dead := lockdtest.SilentAddr(t)
	node := fakeNode(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/status":
			fmt.Fprintf(w, `{"leader":{"id":"n9","http_addr":%q}}`, dead)
		case "/v1/check":
			fmt.Fprint(w, `{"valid":true,"token":7}`)
		default:
			writeAPIError(w, http.StatusNotFound, wire.CodeNotFound)
		}
	}))
	p := client.RetryPolicy{AttemptTimeout: 30 * time.Second, StatusTimeout: 30 * time.Second}
	c, err := client.NewWith([]string{node}, client.WithToken(""), client.WithRetryPolicy(p),
		client.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	valid, _, err := c.Check(ctxFor(t, time.Minute), "jobs/x", 7)
	took := time.Since(start)
	t.Logf("Check failed over from a node that takes no connection in %v", took.Round(time.Millisecond))
	if err != nil || !valid {
		t.Fatalf("Check: %v, %v", valid, err)
	}
	if bound := 4 * time.Second; took > bound { // the default connect timeout (1s), and room
		t.Fatalf("Check took %v, want under %v", took, bound)
	}
}

// A call whose retries run out says what the cluster last answered, not
// only that the last node tried gave no answer.
func TestGivingUpNamesTheLastAnswer(t *testing.T) {
	t.Parallel()
	var checks atomic.Int32
	c := fakeCluster(t, func(w http.ResponseWriter, r *http.Request) {
		if checks.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"no_leader","message":"no leader yet"}}`)
			return
		}
		panic(http.ErrAbortHandler) // no answer at all
	})
	_, _, err := c.Check(ctxFor(t, time.Minute), "jobs/x", 7)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "no leader yet") {
		t.Fatalf("Check after %d attempts: %v; want the 503's no_leader", checks.Load(), err)
	}
	if checks.Load() < 2 {
		t.Fatalf("gave up after the 503 alone: %v", err)
	}
}

// outageFake is a node with one session, s1 (TTL 1s), whose first
// keepalive is answered 503 without quorum and every later one not at
// all; it counts keepalives and DELETEs.
type outageFake struct{ keepalives, deletes atomic.Int32 }

func (f *outageFake) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions":
		fmt.Fprint(w, `{"id":"s1","ttl":"1s"}`)
	case strings.HasSuffix(r.URL.Path, "/keepalive"):
		if f.keepalives.Add(1) == 1 {
			writeNoQuorum(w)
			return
		}
		panic(http.ErrAbortHandler) // no answer at all
	case r.Method == http.MethodDelete:
		f.deletes.Add(1)
		fmt.Fprint(w, `{}`)
	default:
		fmt.Fprint(w, `{}`)
	}
}

// lostSession returns a session of f's that its keepalives have lost.
func (f *outageFake) lostSession(t *testing.T) *client.Session {
	t.Helper()
	s, err := fakeCluster(t, f.serve).NewSession(ctxFor(t, 10*time.Second), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the session was not reported lost")
	}
	t.Logf("Err: %v", s.Err())
	return s
}

// A session whose keepalives ran out names the cluster's last answer (a
// no_leader *Error with QuorumLost that errors.As finds), though later
// keepalives got no answer at all.
func TestLostSessionNamesTheLastAnswer(t *testing.T) {
	t.Parallel()
	f := &outageFake{}
	err := f.lostSession(t).Err()
	var ae *client.Error
	if !errors.Is(err, client.ErrKeepaliveExpired) || !errors.As(err, &ae) || !ae.QuorumLost ||
		!strings.Contains(err.Error(), noQuorum) {
		t.Fatalf("Err = %v; want ErrKeepaliveExpired naming the 503 with quorum_lost", err)
	}
	if n := f.keepalives.Load(); n < 2 {
		t.Fatalf("%d keepalives: the loss came before any went unanswered", n)
	}
}

// Closing a session already lost sends nothing and returns at once, even
// with a context without a deadline: its locks count as lost already,
// and the cluster expires it.
func TestCloseOfALostSessionSendsNothing(t *testing.T) {
	t.Parallel()
	f := &outageFake{}
	s := f.lostSession(t)
	start := time.Now()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close of a lost session: %v", err)
	}
	t.Logf("Close of the lost session returned in %v", time.Since(start).Round(time.Millisecond))
	if n := f.deletes.Load(); n != 0 {
		t.Fatalf("Close of a lost session sent %d DELETEs", n)
	}
	if !errors.Is(s.Err(), client.ErrKeepaliveExpired) {
		t.Fatalf("Err after Close = %v; want the loss kept", s.Err())
	}
}
