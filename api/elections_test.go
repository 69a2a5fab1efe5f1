package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// bootstrapped starts three nodes with ACLs on and bootstraps them. The
// bootstrap token's secret is only in the bootstrap's answer: when an
// election makes its outcome unknown, nothing can settle it, and a new
// cluster is started.
func bootstrapped(t *testing.T) ([]*testNode, wire.Token) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ns := aclCluster(t)
		var root wire.Token
		if r := ns[1].call("", "POST", "/v1/acl/bootstrap", nil); !noLeader(r) || attempt == 3 {
			if r.status != http.StatusOK || json.Unmarshal(r.body, &root) != nil {
				t.Fatalf("POST /v1/acl/bootstrap: got %s, want 200", r)
			}
			return ns, root
		}
	}
}

// sessionVia opens a session (TTL 30 s) as token through n. One created
// in an unknown outcome is left to its TTL, as a client leaves it.
func (n *testNode) sessionVia(token string) string {
	n.t.Helper()
	var s wire.Session
	waitFor(n.t, 30*time.Second, "a session", func() bool {
		r := n.call(token, "POST", "/v1/sessions", map[string]any{"ttl": "30s"})
		if noLeader(r) {
			return false
		}
		if r.status != http.StatusCreated || json.Unmarshal(r.body, &s) != nil {
			n.t.Fatalf("POST /v1/sessions: got %s, want 201", r)
		}
		return true
	})
	return s.ID
}

// electionAs reads a name as an election as token; path may add a query.
// It returns the answer and its X-Lock-Index.
func (n *testNode) electionAs(token, path string) (wire.Election, uint64) {
	n.t.Helper()
	var e wire.Election
	r := n.as(token, http.StatusOK, "GET", "/v1/elections/"+path, nil, &e)
	index, err := strconv.ParseUint(r.header.Get("X-Lock-Index"), 10, 64)
	if err != nil || index != e.Version {
		n.t.Fatalf("GET /v1/elections/%s: X-Lock-Index %q, version %d", path, r.header.Get("X-Lock-Index"), e.Version)
	}
	return e, index
}

// observe is an observer's blocking read of name's election after
// version index, as token: its first answer.
func (n *testNode) observe(token, name string, index uint64) <-chan wire.Election {
	ch := make(chan wire.Election, 1)
	go func() {
		e, _ := n.electionAs(token, name+"?wait=30s&index="+strconv.FormatUint(index, 10))
		ch <- e
	}()
	return ch
}

// proclaimAs proclaims as token, and again while no leader answers: a
// proclaim may be repeated whatever became of the one before.
func (n *testNode) proclaimAs(token string, body map[string]any) resp {
	n.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r := n.call(token, "POST", "/v1/proclaim", body); !noLeader(r) || time.Now().After(deadline) {
			return r
		}
	}
}

// closeAs closes a session as token; after an unknown outcome it asks
// again, until the answer is 200, or 404 because an earlier try closed it.
func (n *testNode) closeAs(token, session string) {
	n.t.Helper()
	waitFor(n.t, 30*time.Second, "the session closed", func() bool {
		r := n.call(token, "DELETE", "/v1/sessions/"+session, nil)
		return r.status == http.StatusOK || r.status == http.StatusNotFound && !noLeader(r)
	})
}

func observed(t *testing.T, ch <-chan wire.Election, what string) wire.Election {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(40 * time.Second):
		t.Fatalf("the blocking observe did not answer %s", what)
	}
	return wire.Election{}
}

// TestElectionAcceptance is issue 36's check of the server on a fresh
// 3-node cluster with ACLs, each call through whichever node: two
// candidates campaign on one name with their values; the election names
// the first; a read token sees both values but no other token's session;
// a blocking observe wakes on a proclaim (same token, new value) and on
// the leader's session ending (the second candidate, larger token); bad
// proclaims are refused and change nothing.
func TestElectionAcceptance(t *testing.T) {
	ns, root := bootstrapped(t)
	n0, n1, n2 := ns[0], ns[1], ns[2]
	svc := n1.createToken(root.Secret, "svc", "svc/")
	other := n2.createToken(root.Secret, "other", "svc/")
	reader := n0.createTokenWith(root.Secret, "reader", "svc/", "read")
	const name = "svc/scheduler"

	// Nobody leads yet: no leader, never 404.
	e, free := n2.electionAs(reader.Secret, name)
	if e.Leader != nil || e.Candidates != 0 || e.Name != name {
		t.Fatalf("a free name: %+v", e)
	}

	a, b := n1.sessionVia(svc.Secret), n2.sessionVia(svc.Secret)
	campaign := func(n *testNode, session, value, id, wait string) resp {
		return n.call(svc.Secret, "POST", "/v1/acquire", map[string]any{"session": session, "request_id": id, "wait": wait,
			"locks": []map[string]any{{"name": name, "value": value}}})
	}
	first := decodeGrant(t, campaign(n0, a, "10.0.0.7:8080", "a-campaign", "0s"))
	second := async(func() resp { return campaign(n2, b, "10.0.0.8:8080", "b-campaign", "60s") })
	waitFor(t, 30*time.Second, "the second candidate queued", func() bool {
		e, _ := n1.electionAs(reader.Secret, name+"?stale")
		return e.Candidates == 1
	})

	e, index := n1.electionAs(reader.Secret, name)
	if e.Leader == nil || e.Leader.Value != "10.0.0.7:8080" || e.Leader.Token != first.Token || e.Candidates != 1 || index <= free {
		t.Fatalf("with a leader and a candidate: %+v (index %d, free at %d)", e, index, free)
	}
	if since := e.Leader.Since; since.IsZero() || time.Since(since) > time.Minute {
		t.Errorf("leader since %v, want the grant's time", since)
	}

	// The lock view shows both values (the leader's, the candidate's) to
	// the read token, the sessions only to their own.
	var l wire.Lock
	n2.as(reader.Secret, http.StatusOK, "GET", "/v1/locks/"+name, nil, &l)
	if len(l.Holders) != 1 || l.Holders[0].Value != "10.0.0.7:8080" || l.Holders[0].Session != "" || l.Holders[0].Token != first.Token ||
		len(l.Waiters) != 1 || l.Waiters[0].Session != "" || l.Waiters[0].Value != "10.0.0.8:8080" {
		t.Fatalf("the lock as the read token sees it: %+v", l)
	}
	n0.as(svc.Secret, http.StatusOK, "GET", "/v1/locks/"+name, nil, &l)
	if len(l.Holders) != 1 || l.Holders[0].Value != "10.0.0.7:8080" || l.Holders[0].Session != a {
		t.Fatalf("the lock as its own token sees it: %+v", l)
	}
	var listed []wire.Lock
	n1.as(reader.Secret, http.StatusOK, "GET", "/v1/locks?prefix=svc/", nil, &listed)
	if len(listed) != 1 || len(listed[0].Holders) != 1 || listed[0].Holders[0].Value != "10.0.0.7:8080" || listed[0].Holders[0].Session != "" {
		t.Fatalf("the list as the read token sees it: %+v", listed)
	}
	var sess wire.Session
	n2.as(svc.Secret, http.StatusOK, "GET", "/v1/sessions/"+a, nil, &sess)
	if len(sess.Held) != 1 || sess.Held[0].Value != "10.0.0.7:8080" {
		t.Fatalf("the leader's session: %+v", sess.Held)
	}

	// A proclaim keeps the token, moves the version and wakes an observer.
	watch := n2.observe(reader.Secret, name, index)
	var p wire.ProclaimResponse
	r := n1.proclaimAs(svc.Secret, map[string]any{"session": a, "name": name, "value": "10.0.0.7:9090"})
	if r.status != http.StatusOK || json.Unmarshal(r.body, &p) != nil {
		t.Fatalf("proclaim: %s", r)
	}
	if p.Name != name || p.Token != first.Token || p.Value != "10.0.0.7:9090" || p.Version <= index {
		t.Fatalf("proclaim answered %+v (token %d, index before %d)", p, first.Token, index)
	}
	e = observed(t, watch, "the proclaim")
	if e.Leader == nil || e.Leader.Token != first.Token || e.Leader.Value != "10.0.0.7:9090" || e.Version != p.Version {
		t.Fatalf("the observer after the proclaim: %+v, want token %d, value 10.0.0.7:9090, version %d", e, first.Token, p.Version)
	}

	// Refused proclaims change nothing.
	checkErr(t, n0.proclaimAs(svc.Secret, map[string]any{"session": b, "name": name, "value": "usurper"}),
		http.StatusConflict, "not_held", "a candidate's proclaim")
	checkErr(t, n2.proclaimAs(other.Secret, map[string]any{"session": a, "name": name, "value": "usurper"}),
		http.StatusNotFound, "session_not_found", "another token's proclaim")
	checkErr(t, n2.proclaimAs(reader.Secret, map[string]any{"session": a, "name": name, "value": "usurper"}),
		http.StatusNotFound, "session_not_found", "a read token's proclaim")
	checkErr(t, n1.proclaimAs(svc.Secret, map[string]any{"session": a, "name": name, "value": strings.Repeat("x", 5<<10)}),
		http.StatusBadRequest, "invalid_request", "a 5 KiB proclaim")
	checkErr(t, n1.proclaimAs(svc.Secret, map[string]any{"session": a, "name": name, "value": "v", "token": first.Token + 1}),
		http.StatusConflict, "not_held", "a proclaim with another token")
	checkErr(t, n0.call(svc.Secret, "POST", "/v1/acquire", map[string]any{"session": a, "request_id": "a-big",
		"locks": []map[string]any{{"name": "svc/big", "value": strings.Repeat("x", 5<<10)}}}),
		http.StatusBadRequest, "invalid_request", "a 5 KiB acquire")
	if e, _ = n0.electionAs(reader.Secret, name); e.Version != p.Version || e.Leader == nil || e.Leader.Value != "10.0.0.7:9090" {
		t.Fatalf("after refused proclaims: %+v, want version %d unchanged", e, p.Version)
	}
	if n2.as(svc.Secret, http.StatusOK, "GET", "/v1/sessions/"+a, nil, &sess); len(sess.Held) != 1 || len(sess.Pending) != 0 {
		t.Fatalf("the refused acquire left %+v", sess)
	}

	// The leader's session ends: the observer wakes with the candidate,
	// which holds with a larger token and its own value.
	watch = n1.observe(reader.Secret, name, p.Version)
	n0.closeAs(svc.Secret, a)
	e = observed(t, watch, "the leader's end")
	g := decodeGrant(t, recv(t, second, 60*time.Second, "the second candidate's grant"))
	if e.Leader == nil || e.Leader.Token != g.Token || e.Leader.Token <= first.Token || e.Leader.Value != "10.0.0.8:8080" || e.Candidates != 0 {
		t.Fatalf("the observer after the leader's session closed: %+v; the candidate was granted token %d", e, g.Token)
	}

	// A revoked hold cannot be proclaimed back to life.
	waitFor(t, 30*time.Second, "the revoke", func() bool {
		r := n2.call(root.Secret, "POST", "/v1/revoke", map[string]any{"name": name})
		if r.status == http.StatusOK {
			return true
		}
		e, _ := n2.electionAs(reader.Secret, name) // an unknown outcome: see whether it was applied
		return e.Leader == nil
	})
	checkErr(t, n1.proclaimAs(svc.Secret, map[string]any{"session": b, "name": name, "value": "back"}),
		http.StatusConflict, "not_held", "a proclaim after a revoke")
	if e, _ = n1.electionAs(reader.Secret, name); e.Leader != nil {
		t.Fatalf("after the revoke and a proclaim: %+v, want no leader", e)
	}
}

// Values and proclaims on one node without ACLs: what a value may be
// and where the request's size limit counts it.
func TestProclaimAndValueRefusals(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)
	other := n.session(nil)
	var g wire.AcquireResponse
	n.must(http.StatusOK, "PUT", "/v1/locks/e?session="+s+"&value=10.0.0.1%3A80", nil, &g)
	if e, _ := n.electionAs("", "e"); e.Leader == nil || e.Leader.Value != "10.0.0.1:80" || e.Leader.Token != g.Token {
		t.Fatalf("the shorthand's value: %+v", e)
	}
	_, before := n.electionAs("", "e")
	for _, c := range []struct {
		what, method, path string
		body               any
		status             int
		code               string
	}{
		{"a value that is not UTF-8", "PUT", "/v1/locks/f?session=" + s + "&value=%FF", nil, http.StatusBadRequest, "invalid_request"},
		{"a value of 4097 bytes", "POST", "/v1/acquire", map[string]any{"session": s,
			"locks": []map[string]any{{"name": "f", "value": strings.Repeat("x", 4097)}}}, http.StatusBadRequest, "invalid_request"},
		{"values over the body limit", "POST", "/v1/acquire", map[string]any{"session": s,
			"locks": manyValues(20, 4000)}, http.StatusBadRequest, "invalid_request"},
		{"a value that is not a string", "POST", "/v1/proclaim", `{"session":"` + s + `","name":"e","value":42}`, http.StatusBadRequest, "invalid_request"},
		{"a proclaim without a name", "POST", "/v1/proclaim", map[string]any{"session": s, "value": "v"}, http.StatusBadRequest, "invalid_request"},
		{"a proclaim of a bad name", "POST", "/v1/proclaim", map[string]any{"session": s, "name": "/e", "value": "v"}, http.StatusBadRequest, "invalid_request"},
		{"a proclaim of 4097 bytes", "POST", "/v1/proclaim", map[string]any{"session": s, "name": "e", "value": strings.Repeat("x", 4097)},
			http.StatusBadRequest, "invalid_request"},
		{"a proclaim of an unknown session", "POST", "/v1/proclaim", map[string]any{"session": "no-such-session-0000000", "name": "e", "value": "v"},
			http.StatusNotFound, "session_not_found"},
		{"a proclaim by another session", "POST", "/v1/proclaim", map[string]any{"session": other, "name": "e", "value": "v"},
			http.StatusConflict, "not_held"},
		{"a proclaim of a name nobody holds", "POST", "/v1/proclaim", map[string]any{"session": s, "name": "f", "value": "v"},
			http.StatusConflict, "not_held"},
	} {
		n.mustErr(c.status, c.code, c.method, c.path, c.body)
		if e, index := n.electionAs("", "e"); index != before || e.Leader.Value != "10.0.0.1:80" {
			t.Fatalf("%s changed the election: %+v", c.what, e)
		}
		if e, _ := n.electionAs("", "f"); e.Leader != nil || e.Candidates != 0 {
			t.Fatalf("%s took f: %+v", c.what, e)
		}
	}
	// The largest value, and a reentrant acquire that keeps it.
	big := strings.Repeat("é", 2048)
	n.must(http.StatusOK, "POST", "/v1/proclaim", map[string]any{"session": s, "name": "e", "value": big}, nil)
	n.must(http.StatusOK, "POST", "/v1/acquire", map[string]any{"session": s, "locks": []map[string]any{{"name": "e"}}}, nil)
	if e, _ := n.electionAs("", "e?stale"); e.Leader == nil || e.Leader.Value != big || e.Leader.Token != g.Token {
		t.Fatalf("after a reentrant acquire without a value: %+v", e.Leader)
	}
	// A proclaim of the value the hold has changes nothing.
	_, before = n.electionAs("", "e")
	var p wire.ProclaimResponse
	n.must(http.StatusOK, "POST", "/v1/proclaim", map[string]any{"session": s, "name": "e", "value": big}, &p)
	if _, after := n.electionAs("", "e"); after != before || p.Version != before {
		t.Fatalf("the same value again moved the name from %d to %d (answered %d)", before, after, p.Version)
	}
}

// manyValues is n locks that each carry a value of size bytes.
func manyValues(n, size int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"name": "many/" + strconv.Itoa(i), "value": strings.Repeat("v", size)}
	}
	return out
}

// During a rolling upgrade, while a voter's build cannot apply values
// (log format 6), an acquire that gives one and a proclaim are not
// proposed: 503 no_leader (for the acquire, with its request id to
// repeat; the proclaim says not_applied), and nothing is written; an
// acquire without a value works. Once every voter applies format 7 they
// are.
func TestValuesWaitForTheFormatGate(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)
	n.node.SetLogFormat(func() int { return 6 })
	held := decodeGrant(t, n.acquire(s, "e", "write", "0s", ""))
	valued := map[string]any{"session": s, "request_id": "valued", "locks": []map[string]any{{"name": "f", "value": "v"}}}
	proclaim := map[string]any{"session": s, "name": "e", "value": "v"}
	msg := checkErr(t, n.do("POST", "/v1/acquire", valued), http.StatusServiceUnavailable, "no_leader", "an acquire with a value under format 6")
	if !strings.Contains(msg, "nothing was done") {
		t.Fatalf("the gated acquire: %q, want it to say nothing was done", msg)
	}
	r := n.do("POST", "/v1/proclaim", proclaim)
	if checkErr(t, r, http.StatusServiceUnavailable, "no_leader", "a proclaim under format 6"); !notApplied(r) {
		t.Fatalf("the gated proclaim: %s, want not_applied", r)
	}
	if e, _ := n.electionAs("", "e"); e.Leader == nil || e.Leader.Token != held.Token || e.Leader.Value != "" {
		t.Fatalf("after the gated proclaim: %+v", e)
	}
	if e, _ := n.electionAs("", "f"); e.Leader != nil {
		t.Fatalf("after the gated acquire: %+v", e)
	}
	n.node.SetLogFormat(func() int { return 7 })
	n.must(http.StatusOK, "POST", "/v1/proclaim", proclaim, nil)
	n.must(http.StatusOK, "POST", "/v1/acquire", valued, nil)
	if e, _ := n.electionAs("", "f"); e.Leader == nil || e.Leader.Value != "v" {
		t.Fatalf("after the upgrade: %+v", e)
	}
}
