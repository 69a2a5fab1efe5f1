package api_test

// A request's answer follows its hold: once the hold ended (hold_ttl,
// surrender, release), an idempotent retry or a re-attach is never told
// "granted" while another session may hold the lock.

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// holder returns the tokens of the current holders of name (linearizable read).
func holderTokens(t *testing.T, n *testNode, name string) []uint64 {
	t.Helper()
	r := n.do("GET", "/v1/locks/"+name, nil)
	if r.status != http.StatusOK {
		return nil
	}
	var l wire.Lock
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, h := range l.Holders {
		out = append(out, h.Token)
	}
	return out
}

// A request whose hold went away by hold_ttl, while another session holds
// the lock, is not granted to a client that retries its acquire with the
// same request_id (the documented reaction to a lost answer / 503) or
// re-attaches with GET /v1/requests/{id}.
func TestRetriedAcquireIsNotGrantedAfterHoldTTLExpired(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	a := n.session(nil)
	b := n.session(nil)

	body := map[string]any{"session": a, "request_id": "a-1",
		"locks": []map[string]any{{"name": "res/x", "mode": "write"}}, "hold_ttl": "300ms"}
	ga := decodeGrant(t, n.do("POST", "/v1/acquire", body))

	// B queues and is granted once A's hold_ttl runs out (leader tick).
	gb := decodeGrant(t, n.acquire(b, "res/x", "write", "20s", "b-1"))
	if gb.Token <= ga.Token {
		t.Fatalf("B's token %d not above A's %d", gb.Token, ga.Token)
	}
	if toks := holderTokens(t, n, "res/x"); len(toks) != 1 || toks[0] != gb.Token {
		t.Fatalf("holders of res/x = %v, want only B's token %d", toks, gb.Token)
	}
	var c wire.CheckResponse
	n.must(http.StatusOK, "GET", "/v1/check?name=res/x&token="+strconv.FormatUint(ga.Token, 10), nil, &c)
	if c.Valid {
		t.Fatalf("A's token still valid: %+v", c)
	}

	// A retries its acquire with the same request_id (as after a lost answer).
	r := n.do("POST", "/v1/acquire", body)
	if r.status == http.StatusOK && strings.Contains(string(r.body), `"status":"granted"`) {
		t.Errorf("retried acquire a-1 answered %s although session B holds res/x (token %d) and A holds nothing", r, gb.Token)
	}
	// A re-attaches instead.
	r = n.do("GET", "/v1/requests/a-1", nil)
	if strings.Contains(string(r.body), `"status":"granted"`) {
		t.Errorf("GET /v1/requests/a-1 answered %s although session B holds res/x (token %d)", r, gb.Token)
	}
}

// The same with an involuntary surrender: on_deadlock "surrender" takes a
// lock away from the victim; the victim's original grant no longer
// answers "granted".
func TestRequestIsNotGrantedAfterDeadlockSurrender(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	older := n.session(nil)                                                       // B
	victim := n.session(map[string]any{"ttl": "30s", "on_deadlock": "surrender"}) // A: youngest

	ga := decodeGrant(t, n.acquire(victim, "dl/x", "write", "0s", "a-x"))
	decodeGrant(t, n.acquire(older, "dl/y", "write", "0s", "b-y"))

	bx := async(func() resp { return n.acquire(older, "dl/x", "write", "20s", "b-x") })
	n.waitPending("b-x")
	ay := async(func() resp { return n.acquire(victim, "dl/y", "write", "20s", "a-y") })

	// The cycle is broken by A surrendering dl/x: B gets it.
	gbx := decodeGrant(t, recv(t, bx, 20*time.Second, "b-x"))
	if toks := holderTokens(t, n, "dl/x"); len(toks) != 1 || toks[0] != gbx.Token {
		t.Fatalf("holders of dl/x = %v, want only B's token %d", toks, gbx.Token)
	}
	r := n.do("GET", "/v1/requests/a-x", nil)
	if strings.Contains(string(r.body), `"status":"granted"`) {
		t.Errorf("GET /v1/requests/a-x answered %s although A surrendered dl/x and B holds it (token %d)", r, gbx.Token)
	}
	r = n.acquire(victim, "dl/x", "write", "0s", "a-x") // retry with the same request_id
	if r.status == http.StatusOK && strings.Contains(string(r.body), `"status":"granted"`) {
		t.Errorf("retried acquire a-x answered %s although B holds dl/x (token %d)", r, gbx.Token)
	}
	// Let A's pending acquire end.
	n.do("DELETE", "/v1/sessions/"+older, nil)
	recv(t, ay, 20*time.Second, "a-y")
	_ = ga
}

// A retried acquire (same request_id) of a request that was granted and then
// released by request_id is answered as released (409), not as a failure
// of the node.
func TestRetriedAcquireAfterReleaseByRequestIsNotAnError(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	a := n.session(nil)
	decodeGrant(t, n.acquire(a, "rel/x", "write", "0s", "a-rel"))
	n.must(http.StatusOK, "POST", "/v1/release", map[string]any{"session": a, "request_id": "a-rel"}, nil)
	r := n.acquire(a, "rel/x", "write", "0s", "a-rel")
	if r.status >= 500 {
		t.Errorf("retried acquire of a released request answered %s", r)
	}
}
