package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/raftnode"
)

func TestStatusAndMetrics(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)
	n.mustGrant(s, "m/a", "write")

	st := n.status()
	addr := strings.TrimPrefix(n.ts.URL, "http://")
	if st.NodeID != "n1" || st.State != "leader" || st.Leader.ID != "n1" || st.Leader.HTTPAddr != addr ||
		st.Term == 0 || st.AppliedIndex == 0 || st.CommitIndex < st.AppliedIndex || len(st.Digest) != 64 ||
		st.LogStore != raftnode.LogWAL {
		t.Fatalf("status = %+v", st)
	}
	if len(st.Members) != 1 || st.Members[0].ID != "n1" || !st.Members[0].Voter || st.Members[0].RaftAddr != n.raft ||
		st.Members[0].HTTPAddr != addr || st.Members[0].Status != "alive" {
		t.Fatalf("members = %+v", st.Members)
	}
	if q := st.Quorum; st.QuorumLost || q.Voters != 1 || q.Needed != 1 || len(q.Reachable) != 1 || q.Reachable[0] != "n1" {
		t.Fatalf("quorum_lost %v, quorum %+v; want n1 alone, of one voter", st.QuorumLost, q)
	}

	// A node without cluster membership cannot leave.
	n.mustErr(http.StatusBadRequest, "invalid_request", "POST", "/v1/agent/leave", nil)

	r := n.must(http.StatusOK, "GET", "/metrics", nil, nil)
	for _, want := range []string{
		`lockd_raft_state{state="leader"} 1`,
		`lockd_raft_has_leader 1`,
		`lockd_raft_term `,
		`lockd_raft_commit_index `,
		`lockd_raft_applied_index `,
		`lockd_sessions 1`,
		`lockd_held_locks 1`,
		`lockd_waiters 0`,
		`lockd_quorum_lost 0`,
		`lockd_voters_reachable 1`,
		`lockd_http_request_duration_seconds_bucket{code="201",route="POST /v1/sessions",le=`,
		`lockd_http_request_duration_seconds_count{code="200",route="POST /v1/acquire"} 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestThreeNodes: writes through followers are forwarded; a waiter on one
// follower is granted when a release arrives through another; a client
// re-attaches to the request on a third node; all nodes converge.
func TestThreeNodes(t *testing.T) {
	ns := threeNodes(t, nodeOptions{})
	leader, f1, f2 := ns[0], ns[1], ns[2]

	a, b := f1.session(nil), f2.session(nil)
	ga := f1.mustGrant(a, "jobs/nightly", "write")
	ch := async(func() resp { return f2.acquire(b, "jobs/nightly", "write", "20s", "tn-1") })
	f2.waitPending("tn-1")
	re := async(func() resp { return leader.do("GET", "/v1/requests/tn-1?wait=20s", nil) })

	f1.must(http.StatusOK, "DELETE", "/v1/locks/jobs/nightly?session="+a, nil, nil)
	gb := decodeGrant(t, recv(t, ch, 10*time.Second, "the follower's waiter"))
	if gb.Token <= ga.Token {
		t.Fatalf("token %d after %d", gb.Token, ga.Token)
	}
	if r := recv(t, re, 10*time.Second, "the re-attached long-poll"); !strings.Contains(string(r.body), `"status":"granted"`) {
		t.Fatalf("re-attach on the leader: %s", r)
	}

	// Linearizable reads on a follower see the write at once.
	var c struct{ Valid bool }
	f1.must(http.StatusOK, "GET", "/v1/check?name=jobs/nightly&token="+strconv.FormatUint(gb.Token, 10), nil, &c)
	if !c.Valid {
		t.Fatal("a follower's linearizable check missed the grant")
	}

	// Every node at the leader's index and digest, naming it: the one of
	// the setup unless an election under load replaced it (the roles
	// below follow the one that leads now).
	var want wire.StatusResponse
	waitFor(t, 10*time.Second, "every node at the same index and digest, naming one leader", func() bool {
		var sts []wire.StatusResponse
		want = wire.StatusResponse{}
		for _, n := range ns {
			sts = append(sts, n.status())
		}
		for i, st := range sts {
			if st.State == "leader" {
				leader, f1, f2, want = ns[i], ns[(i+1)%3], ns[(i+2)%3], st
			}
		}
		for _, st := range sts {
			if st.AppliedIndex != want.AppliedIndex || st.Digest != want.Digest || st.Leader.ID != want.NodeID || want.NodeID == "" {
				return false
			}
		}
		return true
	})
	if len(want.Members) != 3 {
		t.Fatalf("members = %+v", want.Members)
	}

	// A node that is gone for good is removed through any node (forwarded
	// to the leader); the leader cannot remove itself this way.
	f2.stop()
	var out struct{ Removed string }
	f1.must(http.StatusOK, "DELETE", "/v1/members/"+f2.id, nil, &out)
	if out.Removed != f2.id {
		t.Fatalf("removed %q", out.Removed)
	}
	servers, err := leader.node.Servers()
	if err != nil || len(servers) != 2 {
		t.Fatalf("servers after removal = %+v, %v", servers, err)
	}
	leader.mustErr(http.StatusBadRequest, "invalid_request", "DELETE", "/v1/members/"+leader.id, nil)
	f1.mustErr(http.StatusBadRequest, "invalid_request", "DELETE", "/v1/members/"+leader.id, nil) // forwarded
	// Writes still commit with two of two voters.
	f1.mustGrant(a, "after/removal", "write")
}

// TestRemoveLiveMember: a removal the leader refuses because the member is
// alive (its remove rule, which gossip sets in lockd) answers 409
// member_alive through any node, naming `lockd leave`, and removes
// nothing.
func TestRemoveLiveMember(t *testing.T) {
	ns := threeNodes(t, nodeOptions{})
	for _, n := range ns {
		n.node.SetRemoveRule(func(string) bool { return true }) // every member alive
	}
	for _, via := range ns {
		// A member that does not lead: the leader refuses to remove
		// itself (400) before it asks the rule.
		var target *testNode
		var r resp
		waitFor(t, 20*time.Second, "an answer about a member that does not lead", func() bool {
			for _, n := range ns {
				if n.node.Status().State != "leader" {
					target = n
				}
			}
			r = via.do("DELETE", "/v1/members/"+target.id, nil)
			return r.status != http.StatusBadRequest
		})
		msg := checkErr(t, r, http.StatusConflict, "member_alive", "removing live "+target.id+" through "+via.id)
		if !strings.Contains(msg, "`lockd leave` on "+target.id) {
			t.Errorf("message %q does not say to run `lockd leave` on %s", msg, target.id)
		}
	}
	if servers, err := ns[0].node.Servers(); err != nil || len(servers) != 3 {
		t.Fatalf("servers after refused removals = %+v, %v", servers, err)
	}
}
