package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// Holds, waiters and sessions carry when they began (the time the leader
// stamped on their entry), so an age can be told from the replicated log
// rather than from when someone first looked.
func TestViewsSayWhenThingsBegan(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	within := func(what string, got, from, to time.Time) {
		t.Helper()
		// The leader's clock stamps the entry; this process shares it.
		if got.IsZero() || got.Before(from.Add(-time.Millisecond)) || got.After(to.Add(time.Millisecond)) {
			t.Errorf("%s: since %v, want a time in [%v, %v]", what, got, from, to)
		}
	}
	t0 := time.Now()
	a := n.session(nil)
	t1 := time.Now()
	time.Sleep(20 * time.Millisecond)
	n.mustGrant(a, "since/x", "write")
	t2 := time.Now()
	time.Sleep(20 * time.Millisecond)
	b := n.session(nil)
	queued := async(func() resp { return n.acquire(b, "since/x", "write", "20s", "since-w") })
	n.waitPending("since-w")
	t3 := time.Now()

	var l wire.Lock
	r := n.must(http.StatusOK, "GET", "/v1/locks/since/x", nil, &l)
	if len(l.Holders) != 1 || len(l.Waiters) != 1 {
		t.Fatalf("lock %+v, want one holder and one waiter", l)
	}
	// X-Table-Time is the clock of since: what an age is measured against.
	now, err := time.Parse(time.RFC3339Nano, r.header.Get("X-Table-Time"))
	if err != nil || now.Before(l.Waiters[0].Since) || now.After(time.Now().Add(time.Millisecond)) {
		t.Errorf("X-Table-Time %q (%v), want a time from the waiter's since %v to now", r.header.Get("X-Table-Time"), err, l.Waiters[0].Since)
	}
	within("holder", l.Holders[0].Since, t1, t2)
	within("waiter", l.Waiters[0].Since, t2, t3)
	var s wire.Session
	n.must(http.StatusOK, "GET", "/v1/sessions/"+a, nil, &s)
	within("session", s.Since, t0, t1)
	var created wire.Session
	n.must(http.StatusCreated, "POST", "/v1/sessions", map[string]any{"ttl": "30s"}, &created)
	if created.Since.Before(t3) {
		t.Errorf("a new session's answer: since %v, want its creation, after %v", created.Since, t3)
	}
	if len(s.Held) != 1 {
		t.Fatalf("session %+v, want one held lock", s)
	}
	within("held lock", s.Held[0].Since, t1, t2)
	var list []wire.Session
	n.must(http.StatusOK, "GET", "/v1/sessions", nil, &list)
	if len(list) != 3 || list[0].Since.IsZero() || list[1].Since.IsZero() || list[2].Since.IsZero() {
		t.Errorf("session list %+v, want all three dated", list)
	}

	n.must(http.StatusOK, "DELETE", "/v1/sessions/"+a, nil, nil)
	if r := recv(t, queued, 20*time.Second, "the waiter's grant"); r.status != http.StatusOK {
		t.Fatalf("waiter: %s", r)
	}
	n.must(http.StatusOK, "GET", "/v1/locks/since/x", nil, &l)
	if len(l.Holders) != 1 || !l.Holders[0].Since.After(t3) {
		t.Errorf("the new holder %+v, want it dated from its own grant, after %v", l.Holders, t3)
	}
}
