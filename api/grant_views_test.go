package api_test

// Review tests: each one demonstrates a suspected correctness bug and is
// expected to FAIL on the current code.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

// holder returns the tokens of the current holders of name (linearizable read).
func holderTokens(t *testing.T, n *testNode, name string) []uint64 {
	t.Helper()
	r := n.do("GET", "/v1/locks/"+name, nil)
	if r.status != http.StatusOK {
		return nil
	}
	var l api.Lock
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, h := range l.Holders {
		out = append(out, h.Token)
	}
	return out
}

// A request that was granted keeps answering "granted" (with its old token)
// after its hold went away by hold_ttl, even while another session holds the
// lock. A client that retries its acquire with the same request_id (the
// documented reaction to a lost answer / 503) or re-attaches with
// GET /v1/requests/{id} is told "you hold it" while somebody else does.
func TestReviewRetriedAcquireSaysGrantedAfterHoldTTLExpired(t *testing.T) {
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
	var c api.CheckResponse
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
// lock away from the victim; the victim's original grant still answers
// "granted".
func TestReviewRequestSaysGrantedAfterDeadlockSurrender(t *testing.T) {
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
// released by request_id answers 500 internal ("unexpected status"): the
// "released" status is not handled by answerFinal.
func TestReviewRetriedAcquireAfterReleaseByRequestIsInternalError(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	a := n.session(nil)
	decodeGrant(t, n.acquire(a, "rel/x", "write", "0s", "a-rel"))
	n.must(http.StatusOK, "POST", "/v1/release", map[string]any{"session": a, "request_id": "a-rel"}, nil)
	r := n.acquire(a, "rel/x", "write", "0s", "a-rel")
	if r.status >= 500 {
		t.Errorf("retried acquire of a released request answered %s", r)
	}
}

// unknownCancelNode commits the first Cancel it is asked for, then reports
// ErrUnknownOutcome for it (as after a forwarding connection broke once the
// leader had the entry).
type unknownCancelNode struct {
	*raftnode.Node
	mu   sync.Mutex
	done bool
}

func (u *unknownCancelNode) Propose(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error) {
	res, idx, err := u.Node.Propose(ctx, cmd)
	if _, ok := cmd.(*lockstate.Cancel); ok && err == nil {
		u.mu.Lock()
		first := !u.done
		u.done = true
		u.mu.Unlock()
		if first {
			return nil, 0, fmt.Errorf("test: %w", raftnode.ErrUnknownOutcome)
		}
	}
	return res, idx, err
}

// When no leader tick ends a wait (here: the leader's wall clock stands
// still, as with a leader whose clock is behind the table clock), the node
// cancels the request after wait+grace and "the cancel's committed result
// decides": a cancel that ended the request answers 409 timeout. If that
// cancel's answer is lost and propose retries it idempotently, the retry
// returns the request's state with Ended = the first cancel's index, which
// answerFinal does not recognise as its own cancel: the client is told
// "409 cancelled" (as if someone had DELETEd the request) instead of timeout.
func TestReviewRetriedTimeoutCancelAnswersCancelled(t *testing.T) {
	frozen := time.Now()
	raftAddr := freeAddr(t)
	logger := hclog.New(&hclog.LoggerOptions{Name: "n1", Level: hclog.Warn, Output: io.Discard})
	node, err := raftnode.Open(raftnode.Config{ID: "n1", DataDir: t.TempDir(), RaftBind: raftAddr,
		Logger: logger, Timing: 0.1, Now: func() time.Time { return frozen }})
	if err != nil {
		t.Fatal(err)
	}
	wrapped := &unknownCancelNode{Node: node}
	srv, err := api.New(api.Config{Node: wrapped, Logger: logger, CancelGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	n := &testNode{t: t, id: "n1", raft: raftAddr, node: node, srv: srv, ts: ts}
	t.Cleanup(n.stop)
	if err := node.Bootstrap([]raftnode.Server{{ID: "n1", Addr: raftAddr, Voter: true}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a leader", func() bool { return node.Status().State == "leader" })

	a := n.session(nil)
	b := n.session(nil)
	decodeGrant(t, n.acquire(a, "c/x", "write", "0s", ""))
	r := n.acquire(b, "c/x", "write", "200ms", "b-wait")
	if r.status != http.StatusConflict || !strings.Contains(string(r.body), `"code":"timeout"`) {
		t.Errorf("acquire whose wait ran out (ended by this node's cancel) answered %s, want 409 timeout", r)
	}
}

// unknownReleaseNode commits the first Release, then reports
// ErrUnknownOutcome for it.
type unknownReleaseNode struct {
	*raftnode.Node
	mu   sync.Mutex
	done bool
}

func (u *unknownReleaseNode) Propose(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error) {
	res, idx, err := u.Node.Propose(ctx, cmd)
	if _, ok := cmd.(*lockstate.Release); ok && err == nil {
		u.mu.Lock()
		first := !u.done
		u.done = true
		u.mu.Unlock()
		if first {
			return nil, 0, fmt.Errorf("test: %w", raftnode.ErrUnknownOutcome)
		}
	}
	return res, idx, err
}

// A release by name whose outcome is unknown is answered 503 no_leader with
// "retry it" — but a release by name is not idempotent: a client that does
// as told drops a reentrant hold twice and loses the lock while one of its
// nested holds is still in use; another session then gets it.
func TestReviewUnknownReleaseTellsClientToRetryNonIdempotentRelease(t *testing.T) {
	raftAddr := freeAddr(t)
	logger := hclog.New(&hclog.LoggerOptions{Name: "n1", Level: hclog.Warn, Output: io.Discard})
	node, err := raftnode.Open(raftnode.Config{ID: "n1", DataDir: t.TempDir(), RaftBind: raftAddr, Logger: logger, Timing: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Node: &unknownReleaseNode{Node: node}, Logger: logger, CancelGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{t: t, id: "n1", raft: raftAddr, node: node, srv: srv, ts: httptest.NewServer(srv)}
	t.Cleanup(n.stop)
	if err := node.Bootstrap([]raftnode.Server{{ID: "n1", Addr: raftAddr, Voter: true}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a leader", func() bool { return node.Status().State == "leader" })

	a := n.session(nil)
	b := n.session(nil)
	decodeGrant(t, n.acquire(a, "re/x", "write", "0s", ""))                        // outer critical section
	decodeGrant(t, n.acquire(a, "re/x", "write", "0s", ""))                        // nested: count 2
	r := n.do("POST", "/v1/release", map[string]any{"session": a, "name": "re/x"}) // leave the nested one
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("release with unknown outcome answered %s", r)
	}
	msg := string(r.body)
	if strings.Contains(msg, "retry") {
		// Do as told.
		n.do("POST", "/v1/release", map[string]any{"session": a, "name": "re/x"})
		// A still believes it holds re/x once (its outer section).
		if rb := n.acquire(b, "re/x", "write", "0s", ""); rb.status == http.StatusOK {
			t.Errorf("after the advised retry of a release (%s), session B was granted re/x while A's outer hold is still in use: %s", msg, rb)
		}
	}
}
