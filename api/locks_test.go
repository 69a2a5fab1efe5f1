package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

func TestAcquireCheckRelease(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)

	g := n.mustGrant(s, "jobs/backup", "write")
	if g.Granted[0].Name != "jobs/backup" || g.Granted[0].Mode != wire.Write || g.Granted[0].Weight != 1 ||
		g.Granted[0].Token != g.Token || !strings.HasPrefix(g.RequestID, "r-") {
		t.Fatalf("grant = %+v", g)
	}
	tok := strconv.FormatUint(g.Token, 10)

	var c wire.CheckResponse
	n.must(http.StatusOK, "GET", "/v1/check?name=jobs/backup&token="+tok, nil, &c)
	if !c.Valid || c.Token != g.Token {
		t.Fatalf("check = %+v", c)
	}
	// A lock on jobs/backup protects what is below it.
	n.must(http.StatusOK, "GET", "/v1/check?name=jobs/backup/part1&token="+tok, nil, &c)
	if !c.Valid {
		t.Fatalf("check below = %+v", c)
	}

	var l wire.Lock
	r := n.must(http.StatusOK, "GET", "/v1/locks/jobs/backup", nil, &l)
	if l.Name != "jobs/backup" || len(l.Holders) != 1 || string(l.Holders[0].Session) != s ||
		l.Holders[0].Token != g.Token || l.Limit != 1 || r.header.Get("X-Lock-Index") != strconv.FormatUint(l.Version, 10) {
		t.Fatalf("lock = %+v (index %q)", l, r.header.Get("X-Lock-Index"))
	}
	var ls []wire.Lock
	n.must(http.StatusOK, "GET", "/v1/locks?prefix=jobs/", nil, &ls)
	if len(ls) != 1 || ls[0].Name != "jobs/backup" {
		t.Fatalf("list = %+v", ls)
	}
	n.must(http.StatusOK, "GET", "/v1/locks?prefix=other/", nil, &ls)
	if len(ls) != 0 {
		t.Fatalf("list other = %+v", ls)
	}

	var rel wire.ReleaseResponse
	n.must(http.StatusOK, "POST", "/v1/release", map[string]any{"session": s, "name": "jobs/backup"}, &rel)
	if len(rel.Released) != 1 || rel.Released[0].Name != "jobs/backup" {
		t.Fatalf("release = %+v", rel)
	}
	n.must(http.StatusOK, "GET", "/v1/check?name=jobs/backup&token="+tok, nil, &c)
	if c.Valid || c.Token != 0 {
		t.Fatalf("check after release = %+v", c)
	}
	n.mustErr(http.StatusConflict, "not_held", "POST", "/v1/release", map[string]any{"session": s, "name": "jobs/backup"})

	// Release by request id.
	g = n.mustGrant(s, "jobs/x", "read")
	n.must(http.StatusOK, "POST", "/v1/release", map[string]any{"session": s, "request_id": g.RequestID}, &rel)
	if len(rel.Released) != 1 || rel.Released[0].Name != "jobs/x" {
		t.Fatalf("release by request = %+v", rel)
	}
}

func TestLockShorthand(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)

	var g wire.AcquireResponse
	n.must(http.StatusOK, "PUT", "/v1/locks/db/orders?session="+s+"&mode=write", nil, &g)
	if g.Granted[0].Name != "db/orders" {
		t.Fatalf("grant = %+v", g)
	}
	// Reentrant: same token, count 2.
	var g2 wire.AcquireResponse
	n.must(http.StatusOK, "PUT", "/v1/locks/db/orders?session="+s+"&mode=write&wait=1s", nil, &g2)
	if g2.Token != g.Token {
		t.Fatalf("reentrant token %d, want %d", g2.Token, g.Token)
	}
	// A second session cannot have it now: 409 timeout naming the holder.
	s2 := n.session(nil)
	msg := n.mustErr(http.StatusConflict, "timeout", "PUT", "/v1/locks/db/orders/42?session="+s2, nil)
	if !strings.Contains(msg, "session "+s) || !strings.Contains(msg, "db/orders") {
		t.Fatalf("timeout message %q does not name the holder", msg)
	}

	var rel wire.ReleaseResponse
	n.must(http.StatusOK, "DELETE", "/v1/locks/db/orders?session="+s, nil, &rel)
	var l wire.Lock
	n.must(http.StatusOK, "GET", "/v1/locks/db/orders", nil, &l)
	if l.Holders[0].Count != 1 {
		t.Fatalf("count after one release = %d", l.Holders[0].Count)
	}
	n.must(http.StatusOK, "DELETE", "/v1/locks/db/orders?session="+s, nil, &rel)
	n.mustErr(http.StatusConflict, "not_held", "DELETE", "/v1/locks/db/orders?session="+s, nil)
	n.mustErr(http.StatusNotFound, "lock_not_found", "GET", "/v1/locks/db/orders", nil)

	// Semaphore through the shorthand.
	n.must(http.StatusOK, "PUT", "/v1/locks/pool?session="+s+"&limit=3&weight=2", nil, &g)
	n.must(http.StatusOK, "PUT", "/v1/locks/pool?session="+s2+"&limit=3&weight=1", nil, &g)
	n.must(http.StatusOK, "GET", "/v1/locks/pool", nil, &l)
	if l.Limit != 3 || len(l.Holders) != 2 {
		t.Fatalf("semaphore = %+v", l)
	}
}

func TestAcquireIdempotent(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)
	g1 := decodeGrant(t, n.acquire(s, "a", "write", "0s", "job-1"))
	g2 := decodeGrant(t, n.acquire(s, "a", "write", "0s", "job-1"))
	if g1.RequestID != "job-1" || g2.RequestID != "job-1" || g1.Token != g2.Token {
		t.Fatalf("repeat: %+v vs %+v", g1, g2)
	}
	var sess wire.Session
	n.must(http.StatusOK, "GET", "/v1/sessions/"+s, nil, &sess)
	if len(sess.Held) != 1 || sess.Held[0].Count != 1 {
		t.Fatalf("a repeated acquire counted twice: %+v", sess.Held)
	}
	// The same id from another session is that session's own request.
	s2 := n.session(nil)
	g3 := decodeGrant(t, n.acquire(s2, "b", "write", "0s", "job-1"))
	if string(g3.Session) != s2 || g3.Token == g1.Token {
		t.Fatalf("another session's job-1: %+v, first %+v", g3, g1)
	}
	// Without ACLs every session is the caller's: a lookup by the id alone
	// must name the session.
	n.mustErr(http.StatusBadRequest, "invalid_request", "GET", "/v1/requests/job-1", nil)
	var rq wire.Request
	n.must(http.StatusOK, "GET", "/v1/requests/job-1?session="+s2, nil, &rq)
	if string(rq.Session) != s2 || rq.Token != g3.Token {
		t.Fatalf("GET job-1 of %s: %+v", s2, rq)
	}
}

func TestWaiterGrantedOnRelease(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	a, b := n.session(nil), n.session(nil)
	ga := n.mustGrant(a, "jobs/backup", "write")

	ch := async(func() resp { return n.acquire(b, "jobs/backup", "write", "20s", "waiter-1") })
	n.waitPending("waiter-1")

	// The request can be observed (and re-attached to) meanwhile.
	var rq wire.Request
	n.must(http.StatusOK, "GET", "/v1/requests/waiter-1", nil, &rq)
	if rq.Status != "pending" || string(rq.Session) != b || len(rq.Locks) != 1 || rq.Deadline.IsZero() {
		t.Fatalf("pending request = %+v", rq)
	}
	var l wire.Lock
	n.must(http.StatusOK, "GET", "/v1/locks/jobs/backup", nil, &l)
	if len(l.Waiters) != 1 || l.Waiters[0].RequestID != "waiter-1" {
		t.Fatalf("waiters = %+v", l.Waiters)
	}
	reattach := async(func() resp { return n.do("GET", "/v1/requests/waiter-1?wait=20s", nil) })
	again := async(func() resp { return n.acquire(b, "jobs/backup", "write", "20s", "waiter-1") })

	n.must(http.StatusOK, "POST", "/v1/release", map[string]any{"session": a, "name": "jobs/backup"}, nil)
	gb := decodeGrant(t, recv(t, ch, 10*time.Second, "the waiter's grant"))
	if gb.Token <= ga.Token || gb.RequestID != "waiter-1" {
		t.Fatalf("waiter grant %+v after token %d", gb, ga.Token)
	}
	r := recv(t, reattach, 10*time.Second, "the re-attached long-poll")
	if err := json.Unmarshal(r.body, &rq); err != nil || r.status != http.StatusOK || rq.Status != "granted" || rq.Token != gb.Token {
		t.Fatalf("re-attach: %s", r)
	}
	if g := decodeGrant(t, recv(t, again, 10*time.Second, "the repeated acquire")); g.Token != gb.Token {
		t.Fatalf("repeated acquire token %d, want %d", g.Token, gb.Token)
	}
}

func TestWaitTimesOut(t *testing.T) {
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.MaxWait = 2 * time.Second }})
	a, b := n.session(nil), n.session(nil)
	n.mustGrant(a, "x", "write")

	// The table's deadline (the leader ticks it) ends the wait.
	start := time.Now()
	r := n.acquire(b, "x", "write", "300ms", "")
	msg := checkErr(t, r, http.StatusConflict, "timeout", "acquire with wait")
	if el := time.Since(start); el < 300*time.Millisecond || el > 5*time.Second {
		t.Fatalf("timeout after %v, want about 300ms", el)
	}
	if !strings.Contains(msg, "session "+a) {
		t.Fatalf("timeout message %q does not name the holder", msg)
	}

	// A wait above the server's maximum is capped.
	start = time.Now()
	r = n.acquire(b, "x", "write", "1h", "capped")
	checkErr(t, r, http.StatusConflict, "timeout", "capped wait")
	if el := time.Since(start); el < 2*time.Second || el > 8*time.Second {
		t.Fatalf("capped wait took %v, want about 2s", el)
	}
	var rq wire.Request
	n.must(http.StatusOK, "GET", "/v1/requests/capped", nil, &rq)
	if rq.Status != "timeout" {
		t.Fatalf("request after timeout = %+v", rq)
	}
}

func TestCancelAndSessionCloseEndWaits(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	a, b := n.session(nil), n.session(nil)
	n.mustGrant(a, "x", "write")

	ch := async(func() resp { return n.acquire(b, "x", "write", "20s", "c-1") })
	n.waitPending("c-1")
	var rq wire.Request
	n.must(http.StatusOK, "DELETE", "/v1/requests/c-1", nil, &rq)
	if rq.Status != "cancelled" {
		t.Fatalf("cancel = %+v", rq)
	}
	checkErr(t, recv(t, ch, 10*time.Second, "the cancelled acquire"), http.StatusConflict, "cancelled", "cancelled acquire")
	// Cancelling again reports the state; cancelling what was granted says granted.
	n.must(http.StatusOK, "DELETE", "/v1/requests/c-1?session="+b, nil, &rq)
	g := n.mustGrant(b, "y", "write")
	n.must(http.StatusOK, "DELETE", "/v1/requests/"+g.RequestID, nil, &rq)
	if rq.Status != "granted" || rq.Token != g.Token {
		t.Fatalf("cancel of a granted request = %+v", rq)
	}
	n.mustErr(http.StatusNotFound, "request_not_found", "DELETE", "/v1/requests/nope", nil)
	n.mustErr(http.StatusNotFound, "request_not_found", "GET", "/v1/requests/nope", nil)
	n.mustErr(http.StatusNotFound, "request_not_found", "GET", "/v1/requests/nope?wait=1s", nil)

	// The waiter's session closes: its wait ends with session_not_found.
	ch = async(func() resp { return n.acquire(b, "x", "write", "20s", "c-2") })
	n.waitPending("c-2")
	n.must(http.StatusOK, "DELETE", "/v1/sessions/"+b, nil, nil)
	checkErr(t, recv(t, ch, 10*time.Second, "the orphaned acquire"), http.StatusNotFound, "session_not_found", "closed session's acquire")
}

func TestSurrender(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	a, b := n.session(nil), n.session(nil)
	n.mustGrant(a, "x", "write")

	var sr wire.SurrenderResponse
	n.must(http.StatusOK, "POST", "/v1/surrender", map[string]any{"session": a, "name": "x"}, &sr)
	if sr.Status != "kept" || sr.Name != "x" {
		t.Fatalf("surrender with no waiter = %+v", sr)
	}
	ch := async(func() resp { return n.acquire(b, "x", "write", "20s", "s-1") })
	n.waitPending("s-1")
	n.must(http.StatusOK, "POST", "/v1/surrender", map[string]any{"session": a, "name": "x"}, &sr)
	if sr.Status != "surrendered" {
		t.Fatalf("surrender = %+v", sr)
	}
	decodeGrant(t, recv(t, ch, 10*time.Second, "the grant after surrender"))
	n.mustErr(http.StatusConflict, "not_held", "POST", "/v1/surrender", map[string]any{"session": b, "name": "other"})
}

func TestConflictCodes(t *testing.T) {
	n := singleNode(t, nodeOptions{})

	t.Run("deadlock", func(t *testing.T) {
		a, b := n.session(nil), n.session(nil)
		n.mustGrant(a, "d/x", "write")
		n.mustGrant(b, "d/y", "write")
		ch := async(func() resp { return n.acquire(a, "d/y", "write", "20s", "dl-a") })
		n.waitPending("dl-a")
		// b is the younger session in the cycle: its request is the victim.
		checkErr(t, n.acquire(b, "d/x", "write", "20s", "dl-b"), http.StatusConflict, "deadlock", "victim")
		n.must(http.StatusOK, "DELETE", "/v1/sessions/"+b, nil, nil)
		decodeGrant(t, recv(t, ch, 10*time.Second, "the survivor's grant"))
	})
	t.Run("poorly_ordered_access", func(t *testing.T) {
		o := n.session(map[string]any{"ttl": "30s", "ordered": true})
		n.mustGrant(o, "o/b", "write")
		checkErr(t, n.acquire(o, "o/a", "write", "0s", ""), http.StatusConflict, "poorly_ordered_access", "out of order")
	})
	t.Run("limit_mismatch", func(t *testing.T) {
		a, b := n.session(nil), n.session(nil)
		n.must(http.StatusOK, "PUT", "/v1/locks/sem?session="+a+"&limit=3", nil, nil)
		n.mustErr(http.StatusConflict, "limit_mismatch", "PUT", "/v1/locks/sem?session="+b+"&limit=2", nil)
	})
	t.Run("not_held", func(t *testing.T) {
		a := n.session(nil)
		n.mustErr(http.StatusConflict, "not_held", "POST", "/v1/release", map[string]any{"session": a, "name": "nothing"})
	})
	t.Run("session_not_found", func(t *testing.T) {
		n.mustErr(http.StatusNotFound, "session_not_found", "POST", "/v1/acquire",
			`{"session":"999999","locks":[{"name":"a"}]}`)
		n.mustErr(http.StatusNotFound, "session_not_found", "POST", "/v1/release", `{"session":"999999","name":"a"}`)
	})
}

func TestBlockingQuery(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)
	n.mustGrant(s, "w", "write")
	r := n.must(http.StatusOK, "GET", "/v1/locks/w", nil, nil)
	v := r.header.Get("X-Lock-Index")

	// Nothing changes: the query answers at its wait with the same version.
	start := time.Now()
	r = n.must(http.StatusOK, "GET", "/v1/locks/w?index="+v+"&wait=300ms", nil, nil)
	if el := time.Since(start); el < 300*time.Millisecond || r.header.Get("X-Lock-Index") != v {
		t.Fatalf("unchanged query returned after %v with index %s (was %s)", el, r.header.Get("X-Lock-Index"), v)
	}

	// A change wakes it.
	ch := async(func() resp { return n.do("GET", "/v1/locks/w?index="+v+"&wait=20s", nil) })
	time.Sleep(100 * time.Millisecond)
	s2 := n.session(nil)
	bq := async(func() resp { return n.acquire(s2, "w", "write", "1s", "bq") })
	r = recv(t, ch, 10*time.Second, "the blocking query")
	var l wire.Lock
	if err := json.Unmarshal(r.body, &l); err != nil || r.status != http.StatusOK {
		t.Fatalf("blocking query: %s", r)
	}
	nv, _ := strconv.ParseUint(r.header.Get("X-Lock-Index"), 10, 64)
	ov, _ := strconv.ParseUint(v, 10, 64)
	if nv <= ov || l.Version != nv || len(l.Waiters) != 1 {
		t.Fatalf("woken with version %d (was %d): %+v", nv, ov, l)
	}

	checkErr(t, recv(t, bq, 10*time.Second, "the queued acquire"), http.StatusConflict, "timeout", "queued acquire")

	// A name nobody uses: the query and answers 404 with an index.
	ch = async(func() resp { return n.do("GET", "/v1/locks/gone?index=0&wait=1s", nil) })
	r = recv(t, ch, 10*time.Second, "a query on a free name")
	checkErr(t, r, http.StatusNotFound, "lock_not_found", "free name")
	if r.header.Get("X-Lock-Index") == "" {
		t.Fatal("no X-Lock-Index on a 404")
	}
}
