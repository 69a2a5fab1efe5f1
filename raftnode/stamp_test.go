package raftnode

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// holdEnds makes a 3-node cluster, each node configured by tweak (nil:
// as it is), acquires with a hold TTL through a follower, and checks on
// every node whether the table will end the hold by its TTL (an expiry
// on the table clock): want.
func holdEnds(t *testing.T, tweak func(*Config), want bool) {
	c := newTestCluster(t, 3, tweak)
	n := c.followers(c.leader())[0].get()
	s := createSession(t, n, time.Hour)
	acquire(t, n, s, "held", "r1", 0, time.Hour)
	c.converged()
	for _, tn := range c.nodes {
		var info lockstate.LockInfo
		var deadline bool
		tn.get().FSM().Read(func(tab *lockstate.Table) {
			info, _ = tab.Lock("held")
			_, deadline = tab.NextDeadline()
		})
		if len(info.Holders) != 1 {
			t.Fatalf("%s: holders %+v, want the session's hold", tn.id, info.Holders)
		}
		if ends := info.Holders[0].Expires != 0 && deadline; ends != want {
			t.Errorf("%s: the hold ends by its TTL: %v (expires %d), want %v", tn.id, ends, info.Holders[0].Expires, want)
		}
	}
}

// An acquire with a hold TTL, proposed through a follower, leaves a hold
// that the table will end.
func TestHoldTTLEndsHolds(t *testing.T) { holdEnds(t, nil, true) }

// A key may name a session unless it is all digits (a pre-key session's
// decimal id) or starts with "-" (a flag to a command line).
func TestUsableKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"4Yyb-e5n0mDD8K391SwTw_", true},
		{"_4Yyb-e5n0mDD8K391SwTw", true},
		{"-4Yyb-e5n0mDD8K391SwTw", false},
		{"1234567890123456789012", false},
		{"123456789012345678901-", true},
	} {
		if got := usableKey(tc.key); got != tc.want {
			t.Errorf("usableKey(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
	for range 2000 { // 1 in 64 raw draws starts with "-"
		key, err := NewSessionKey()
		if err != nil || !usableKey(key) || len(key) != 22 {
			t.Fatalf("NewSessionKey() = %q, %v", key, err)
		}
	}
}

// The leader scopes an acquire's request id to its session only once
// every voter applies fsm.FormatSessionRequestIDs, whatever the proposer
// sent: below that format another session's id is refused, as an older
// build refuses it; from it on two sessions use one id and each is
// granted. The entry in the log carries the leader's word.
func TestLeaderScopesRequestIDsByFormat(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	for _, tc := range []struct {
		format fsm.Format
		scoped bool
	}{
		{fsm.FormatDenyCert, false},
		{fsm.FormatSessionRequestIDs, true},
	} {
		t.Run(fmt.Sprintf("format %d", tc.format), func(t *testing.T) {
			for _, tn := range c.live() { // every node's gate: the leader may move
				tn.get().SetLogFormat(func() int { return int(tc.format) })
			}
			n := c.follower(c.leader()).get() // a forwarded proposal: the leader stamps it
			id := fmt.Sprintf("job-%d", tc.format)
			a, b := createSession(t, n, time.Minute), createSession(t, n, time.Minute)
			acquire(t, n, a, id+"/a", id, 0, 0)
			res, index := proposeSettled(t, n, &lockstate.Acquire{Session: b, RequestID: id, SessionScoped: !tc.scoped,
				Locks: []lockstate.LockSpec{{Name: id + "/b", Mode: lockstate.Write}}})
			switch {
			case tc.scoped && (res.Err != nil || res.Request.Session != b || res.Request.Status != lockstate.Granted):
				t.Fatalf("b's acquire: %+v, %v; want granted to b", res.Request, res.Err)
			case !tc.scoped && (res.Err == nil || res.Err.Code != lockstate.CodeInvalid):
				t.Fatalf("b's acquire: %+v, %v; want invalid_request", res.Request, res.Err)
			}
			var entry raft.Log
			waitFor(t, 10*time.Second, fmt.Sprintf("entry %d in the log", index), func() bool {
				return n.logs.GetLog(index, &entry) == nil
			})
			_, cmd, err := fsm.Decode(entry.Data)
			if acq, ok := cmd.(*lockstate.Acquire); err != nil || !ok || acq.SessionScoped != tc.scoped {
				t.Fatalf("entry %d: %#v, %v; want an acquire with SessionScoped %v", index, cmd, err, tc.scoped)
			}
		})
	}
}

// deposedProclaim has session a win name e with value "a" and resign,
// session b win it with "b", and then a, the deposed leader, proclaim
// "stale" with its old token, through a follower. It returns that
// proclaim's answer, b's token, and the value b's hold has on each node
// once they agree.
func deposedProclaim(t *testing.T, tweak func(*Config)) (*lockstate.Result, uint64, []string) {
	t.Helper()
	c := newTestCluster(t, 3, tweak)
	n := c.followers(c.leader())[0].get()
	campaign := func(s lockstate.SessionID, value string) uint64 {
		res, _ := propose(t, n, &lockstate.Acquire{Session: s, RequestID: "campaign-" + value,
			Locks: []lockstate.LockSpec{{Name: "e", Mode: lockstate.Write, Value: value}}})
		return res.Request.Token
	}
	a, b := createSession(t, n, time.Hour), createSession(t, n, time.Hour)
	tokA := campaign(a, "a")
	release(t, n, a, "e", tokA)
	tokB := campaign(b, "b")
	res, _ := proposeSettled(t, n, &lockstate.Proclaim{Session: a, Name: "e", Value: "stale", Token: tokA})
	c.converged()
	var values []string
	for _, tn := range c.nodes {
		tn.get().FSM().Read(func(tab *lockstate.Table) {
			info, _ := tab.Lock("e")
			if h, ok := info.Leader(); ok && h.Token == tokB {
				values = append(values, h.Value)
			}
		})
	}
	if len(values) != len(c.nodes) {
		t.Fatalf("b leads e on %d of %d nodes", len(values), len(c.nodes))
	}
	return res, tokB, values
}

// A deposed leader's proclaim is refused, and its successor keeps its
// value (TestUnsafeStaleProclaimGivesTheValueToTheLeader: the negative
// control does not).
func TestDeposedLeaderCannotProclaim(t *testing.T) {
	res, _, values := deposedProclaim(t, nil)
	if res.Err == nil || res.Err.Code != lockstate.CodeNotHeld {
		t.Fatalf("proclaim of the deposed leader: %+v, want not_held", res)
	}
	for _, v := range values {
		if v != "b" {
			t.Fatalf("the leader's value %q, want its own, \"b\"", v)
		}
	}
}
