package raftnode

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/lockstate"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// contactTiming is timing 1: an RPC unanswered for 1s makes a peer
// silent, contact older than 6s says nothing, a follower follows a leader
// heard within 1s.
var contactTiming = newTiming(1)

var errRefused = errors.New("connection refused")

// TestContactsJudge: which voters count as reachable, and when the quorum
// is lost, from what raft saw of each (answers, failures, RPCs left
// unanswered, vote requests received, its leader's contact) and, for a
// voter raft has not asked lately, gossip.
func TestContactsJudge(t *testing.T) {
	const (
		second = time.Second
		U      = time.Second // contactTiming.unanswered
	)
	type env struct {
		c     *contacts
		clock *fakeClock
		// pending holds the outcome functions of RPCs in flight, by name.
		pending map[string]func(error)
	}
	for _, tc := range []struct {
		name   string
		voters []string // n1 is this node
		leader string   // the leader n1 follows, "" for none
		// leaderAgo is how long ago n1's leader was last heard.
		leaderAgo time.Duration
		gone      []string // as gossip sees them; nil: no gossip
		steps     func(e *env)
		reachable []string
		lost      bool
	}{
		{
			name: "a leader's followers answer its heartbeats", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.c.call("n2")(nil)
				e.c.call("n3")(nil)
				e.clock.advance(2 * second)
			},
			reachable: []string{"n1", "n2", "n3"},
		},
		{
			name: "heartbeats unanswered for less than the bound", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.c.call("n2")(nil)
				e.c.call("n3")(nil)
				e.pending["n2"], e.pending["n3"] = e.c.call("n2"), e.c.call("n3")
				e.clock.advance(U - time.Millisecond)
			},
			reachable: []string{"n1", "n2", "n3"},
		},
		{
			name: "two followers frozen: their heartbeats go unanswered", voters: []string{"n1", "n2", "n3"},
			gone: []string{}, // gossip still sees them alive
			steps: func(e *env) {
				e.c.call("n2")(nil)
				e.c.call("n3")(nil)
				e.pending["n2"], e.pending["n3"] = e.c.call("n2"), e.c.call("n3")
				e.clock.advance(U)
			},
			reachable: []string{"n1"}, lost: true,
		},
		{
			name: "one follower frozen of three", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.pending["n2"] = e.c.call("n2")
				e.c.call("n3")(nil)
				e.clock.advance(U)
				e.c.call("n3")(nil)
			},
			reachable: []string{"n1", "n3"},
		},
		{
			name: "refused connections count after the bound, not at once", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.c.call("n2")(errRefused)
				e.c.call("n3")(errRefused)
				e.clock.advance(U / 2)
				e.c.call("n2")(errRefused)
				e.c.call("n3")(errRefused)
			},
			reachable: []string{"n1", "n2", "n3"},
		},
		{
			name: "refused connections for the bound", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.c.call("n2")(errRefused)
				e.c.call("n3")(errRefused)
				e.clock.advance(U)
				e.c.call("n2")(errRefused)
			},
			reachable: []string{"n1"}, lost: true,
		},
		{
			name: "an answer after failures: reachable again", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.c.call("n2")(errRefused)
				e.clock.advance(2 * U)
				e.c.call("n2")(nil)
			},
			reachable: []string{"n1", "n2", "n3"},
		},
		{
			name: "a long snapshot while heartbeats are answered", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.pending["snapshot"] = e.c.call("n2")
				for range 10 {
					e.clock.advance(U / 2)
					e.c.call("n2")(nil)
				}
			},
			reachable: []string{"n1", "n2", "n3"},
		},
		{
			name: "a candidate's pre-votes unanswered", voters: []string{"n1", "n2", "n3"}, gone: []string{},
			steps: func(e *env) {
				e.pending["n2"], e.pending["n3"] = e.c.call("n2"), e.c.call("n3")
				e.clock.advance(U)
			},
			reachable: []string{"n1"}, lost: true,
		},
		{
			name: "a follower of a leader heard lately: not lost, whatever it counts", voters: []string{"n1", "n2", "n3", "n4", "n5"},
			leader: "n2", leaderAgo: 100 * time.Millisecond, gone: []string{"n3", "n4"},
			reachable: []string{"n1", "n2", "n5"},
		},
		{
			name: "a follower of a leader heard lately, most others gone", voters: []string{"n1", "n2", "n3", "n4", "n5"},
			leader: "n2", leaderAgo: 100 * time.Millisecond, gone: []string{"n3", "n4", "n5"},
			reachable: []string{"n1", "n2"},
		},
		{
			name: "a follower whose leader went quiet, and gossip sees the rest gone", voters: []string{"n1", "n2", "n3"},
			leader: "n2", leaderAgo: 3 * second, gone: []string{"n3"},
			reachable: []string{"n1", "n2"},
		},
		{
			name: "a follower's candidacy: its pre-vote to the old leader unanswered", voters: []string{"n1", "n2", "n3"},
			gone: []string{},
			steps: func(e *env) {
				e.c.heard("n2", e.clock.now()) // the leader's last heartbeat
				e.clock.advance(2 * second)
				e.pending["n2"] = e.c.call("n2")
				e.c.call("n3")(nil) // the other follower answers
				e.clock.advance(U)
			},
			reachable: []string{"n1", "n3"},
		},
		{
			name: "a follower's candidacy: both others silent", voters: []string{"n1", "n2", "n3"},
			gone: []string{},
			steps: func(e *env) {
				e.c.heard("n2", e.clock.now())
				e.clock.advance(2 * second)
				e.pending["n2"], e.pending["n3"] = e.c.call("n2"), e.c.call("n3")
				e.clock.advance(U)
			},
			reachable: []string{"n1"}, lost: true,
		},
		{
			name: "no contact either way: gossip decides", voters: []string{"n1", "n2", "n3"},
			gone:      []string{"n2", "n3"},
			reachable: []string{"n1"}, lost: true,
		},
		{
			name: "no contact and no gossip: reachable", voters: []string{"n1", "n2", "n3"},
			reachable: []string{"n1", "n2", "n3"},
		},
		{
			name: "a raft answer outweighs gossip's dead", voters: []string{"n1", "n2", "n3"},
			gone: []string{"n2", "n3"},
			steps: func(e *env) {
				e.c.call("n2")(nil)
				e.clock.advance(second)
			},
			reachable: []string{"n1", "n2"},
		},
		{
			name: "an answer older than the window says nothing", voters: []string{"n1", "n2", "n3"},
			gone: []string{"n2", "n3"},
			steps: func(e *env) {
				e.c.call("n2")(nil)
				e.clock.advance(contactTiming.contactWindow)
			},
			reachable: []string{"n1"}, lost: true,
		},
		{
			name: "failures older than the window say nothing", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.c.call("n2")(errRefused)
				e.c.call("n3")(errRefused)
				e.clock.advance(contactTiming.contactWindow)
			},
			reachable: []string{"n1", "n2", "n3"},
		},
		{
			name: "a vote request received", voters: []string{"n1", "n2", "n3"}, gone: []string{"n2", "n3"},
			steps: func(e *env) {
				e.c.observe(raft.Observation{Data: raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("n3")}}})
				e.c.observe(raft.Observation{Data: raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("n2")}}})
			},
			reachable: []string{"n1", "n2", "n3"},
		},
		{
			name: "a leader named: silence from before says nothing", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.pending["n2"], e.pending["n3"] = e.c.call("n2"), e.c.call("n3")
				e.c.call("n3")(errRefused)
				e.clock.advance(U)
				e.c.observe(raft.Observation{Data: raft.LeaderObservation{LeaderID: "n2"}})
			},
			reachable: []string{"n1", "n2", "n3"},
		},
		{
			name: "no leader named: silence stands", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.pending["n2"], e.pending["n3"] = e.c.call("n2"), e.c.call("n3")
				e.clock.advance(U)
				e.c.observe(raft.Observation{Data: raft.LeaderObservation{}})
			},
			reachable: []string{"n1"}, lost: true,
		},
		{
			name: "an RPC that fails after it went unanswered", voters: []string{"n1", "n2", "n3"},
			steps: func(e *env) {
				e.pending["n2"], e.pending["n3"] = e.c.call("n2"), e.c.call("n3")
				e.clock.advance(10 * second) // the transport's timeout
				e.pending["n2"](errRefused)
				e.pending["n3"](errRefused)
				delete(e.pending, "n2")
				delete(e.pending, "n3")
			},
			reachable: []string{"n1"}, lost: true,
		},
		{
			name: "a single node", voters: []string{"n1"},
			reachable: []string{"n1"},
		},
		{
			name: "in no configuration yet", voters: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			e := &env{c: newContacts(clock.now, contactTiming), clock: clock, pending: map[string]func(error){}}
			if tc.steps != nil {
				tc.steps(e)
			}
			facts := quorumFacts{self: "n1", voters: tc.voters, leader: tc.leader}
			if tc.leader != "" {
				facts.leaderContact = clock.now().Add(-tc.leaderAgo)
			}
			if tc.gone != nil {
				facts.gone = func(id string) bool { return slices.Contains(tc.gone, id) }
			}
			q, _ := e.c.judge(facts)
			if !slices.Equal(q.Reachable, tc.reachable) || q.Lost != tc.lost {
				t.Errorf("reachable %v, lost %v; want %v, %v", q.Reachable, q.Lost, tc.reachable, tc.lost)
			}
			if want := len(tc.voters)/2 + 1; q.Voters != len(tc.voters) || q.Needed != want {
				t.Errorf("voters %d, needed %d; want %d, %d", q.Voters, q.Needed, len(tc.voters), want)
			}
		})
	}
}

// The verdict is recorded: lostSignal is closed while the quorum is lost
// and a fresh channel once it is back; untilLost cuts a call short with
// cause ErrQuorumLost.
func TestContactsLostSignal(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	c := newContacts(clock.now, contactTiming)
	facts := quorumFacts{self: "n1", voters: []string{"n1", "n2", "n3"}}
	ctx, release := c.untilLost(context.Background())
	defer release()

	if _, changed := c.judge(facts); changed || c.isLost() {
		t.Fatal("a new record judged the quorum lost")
	}
	done2, done3 := c.call("n2"), c.call("n3")
	clock.advance(contactTiming.unanswered)
	if q, changed := c.judge(facts); !q.Lost || !changed || !c.isLost() {
		t.Fatalf("two RPCs unanswered for %v: %+v, changed %v", contactTiming.unanswered, q, changed)
	}
	select {
	case <-c.lostSignal():
	default:
		t.Fatal("lostSignal is not closed while the quorum is lost")
	}
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), ErrQuorumLost) {
			t.Fatalf("untilLost's context ended with %v", context.Cause(ctx))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("untilLost's context did not end when the quorum was lost")
	}

	done2(nil)
	done3(nil)
	if q, changed := c.judge(facts); q.Lost || !changed || c.isLost() {
		t.Fatalf("both answered: %+v, changed %v", q, changed)
	}
	select {
	case <-c.lostSignal():
		t.Fatal("lostSignal is closed with the quorum back")
	default:
	}
	if _, changed := c.judge(facts); changed {
		t.Fatal("the same verdict twice reported a change")
	}
}

// A peer removed from the configuration is forgotten: its silence no
// longer counts should it come back.
func TestContactsForget(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	c := newContacts(clock.now, contactTiming)
	c.call("n2")(errRefused)
	clock.advance(contactTiming.unanswered)
	c.observe(raft.Observation{Data: raft.PeerObservation{Removed: true, Peer: raft.Server{ID: "n2"}}})
	q, _ := c.judge(quorumFacts{self: "n1", voters: []string{"n1", "n2"}})
	if !slices.Equal(q.Reachable, []string{"n1", "n2"}) {
		t.Fatalf("reachable %v after n2 was removed and added back", q.Reachable)
	}
}

// A node whose two peers do not answer raft judges its quorum lost from
// raft's own contact, with no gossip, within about an election and the
// unanswered bound, and then fails a write at once with ErrQuorumLost
// instead of waiting for a leader. The peers' addresses stand for the
// ways a stopped node goes quiet: a port that accepts and never answers
// (a frozen process: SIGSTOP), a host whose SYNs go unanswered (a
// stopped container, a dead host), a port that refuses.
func TestQuorumLostToPeersThatDoNotAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"frozen: connections accepted, nothing answered", frozenAddr},
		{"SYNs unanswered", func(t *testing.T) string { return lockdtest.SilentAddr(t) }},
		{"connections refused", func(t *testing.T) string { return lockdtest.RefusingAddr(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, err := Open(Config{ID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Timing: testTiming, Logger: testLogger(t, "n1")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_ = n.Shutdown(ctx)
			})
			servers := []Server{{ID: "n1", Addr: n.RaftAddr(), Voter: true},
				{ID: "n2", Addr: tc.addr(t), Voter: true}, {ID: "n3", Addr: tc.addr(t), Voter: true}}
			start := time.Now()
			if err := n.Bootstrap(servers); err != nil {
				t.Fatal(err)
			}
			// It stands for election after a heartbeat timeout or two;
			// its pre-votes then go unanswered for the bound.
			within := 2*(n.timing.heartbeat+n.timing.election) + n.timing.unanswered + 2*time.Second
			waitFor(t, within, "the quorum judged lost", func() bool { return n.Quorum().Lost })
			t.Logf("quorum judged lost %v after bootstrap", time.Since(start).Round(time.Millisecond))
			if q := n.Quorum(); !slices.Equal(q.Reachable, []string{"n1"}) || q.Voters != 3 || q.Needed != 2 {
				t.Errorf("quorum %+v; want n1 alone reachable of 3, 2 needed", q)
			}
			asked := time.Now()
			_, _, err = n.Propose(context.Background(), &lockstate.CreateSession{TTL: time.Minute})
			if !errors.Is(err, ErrNoLeader) || !errors.Is(err, ErrQuorumLost) {
				t.Fatalf("propose without quorum: %v; want ErrNoLeader and ErrQuorumLost", err)
			}
			if took := time.Since(asked); took >= n.timing.leaderWait {
				t.Errorf("propose without quorum took %v: it waited for a leader", took)
			}
		})
	}
}

// frozenAddr is a loopback address whose connections the kernel completes
// and nobody ever reads or answers, as a SIGSTOPped process's port: a
// listener that never accepts.
func frozenAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// A leader whose followers stop judges its quorum lost; calls then fail at
// once with ErrQuorumLost, and once a follower is back the quorum is
// judged reachable again and a leader is elected.
func TestQuorumLostAndRegained(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	fs := c.followers(l)
	for _, f := range fs {
		f.stop()
	}
	n := l.get()
	within := n.timing.unanswered + 2*n.timing.election + 2*time.Second
	waitFor(t, within, "the quorum judged lost", func() bool { return n.Quorum().Lost })
	asked := time.Now()
	if err := n.ReadIndex(context.Background()); !errors.Is(err, ErrQuorumLost) {
		t.Fatalf("read index without quorum: %v; want ErrQuorumLost", err)
	}
	if took := time.Since(asked); took >= n.timing.leaderWait {
		t.Errorf("read index without quorum took %v: it waited for a leader", took)
	}
	fs[0].start()
	waitFor(t, 20*time.Second, "the quorum judged reachable again", func() bool { return !n.Quorum().Lost })
	createSession(t, n, time.Minute)
}
