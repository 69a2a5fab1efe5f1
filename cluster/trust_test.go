package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/raftnode"
)

// logBuffer collects log output from several goroutines.
type logBuffer struct{ lockdtest.Buffer }

// lines counts the lines that contain every one of subs.
func (l *logBuffer) lines(subs ...string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
			n++
		}
	}
	return n
}

func (l *logBuffer) logger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: l})
}

// verifier is a VerifyPeer that refuses the ids in refuse and counts its
// calls per id, remembering the raft address it was given.
type verifier struct {
	mu     sync.Mutex
	refuse map[string]bool
	calls  map[string]int
	raft   map[string]string
}

func newVerifier(refuse ...string) *verifier {
	v := &verifier{refuse: map[string]bool{}, calls: map[string]int{}, raft: map[string]string{}}
	for _, id := range refuse {
		v.refuse[id] = true
	}
	return v
}

func (v *verifier) verify(ctx context.Context, id, raftAddr string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls[id]++
	v.raft[id] = raftAddr
	if v.refuse[id] {
		return errors.New("certificate does not name " + id)
	}
	return nil
}

func (v *verifier) set(id string, refuse bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refuse[id] = refuse
}

func (v *verifier) called(id string) (int, string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls[id], v.raft[id]
}

func hasMember(c *Cluster, id string) bool {
	if status(c, id) != "" {
		return true
	}
	return slices.ContainsFunc(c.ml.Members(), func(n *memberlist.Node) bool { return n.Name == id })
}

// Nodes with the same gossip key form a pool; a node with no key or
// another key never gets in, and the keyed nodes never list it.
func TestGossipKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	other := bytes.Repeat([]byte{9}, 32)
	n1 := startNodeWith(t, nodeOpts{key: key}, "n1", 0)
	n2 := startNodeWith(t, nodeOpts{key: key}, "n2", 0, n1.gossip())
	_, c1 := n1.get()
	_, c2 := n2.get()
	waitFor(t, 10*time.Second, "n1 and n2 to see each other", func() bool {
		return status(c1, "n2") == StatusAlive && status(c2, "n1") == StatusAlive
	})

	plain := startNode(t, "plain", 0, n1.gossip(), n2.gossip())
	wrong := startNodeWith(t, nodeOpts{key: other}, "wrong", 0, n1.gossip(), n2.gossip())
	_, cp := plain.get()
	_, cw := wrong.get()
	// Long enough for many join attempts, probes and a push/pull round.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range []*Cluster{c1, c2} {
			for _, id := range []string{"plain", "wrong"} {
				if hasMember(c, id) {
					t.Fatalf("%s lists %s, which has no or another gossip key", c.cfg.ID, id)
				}
			}
			if n := c.ml.NumMembers(); n != 2 {
				t.Fatalf("%s sees %d members, want 2", c.cfg.ID, n)
			}
		}
		for _, c := range []*Cluster{cp, cw} {
			if n := c.ml.NumMembers(); n != 1 {
				t.Fatalf("%s joined the keyed pool: %d members", c.cfg.ID, n)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGossipKeyLength(t *testing.T) {
	n1 := startNode(t, "n1", 0)
	node, _ := n1.get()
	_, err := Start(Config{ID: "x", GossipBind: "127.0.0.1:0", GossipKey: make([]byte, 20), LocalTimings: true}, node)
	if err == nil || !strings.Contains(err.Error(), "gossip key") {
		t.Fatalf("Start with a 20-byte key: %v", err)
	}
}

// A member VerifyPeer refuses stays in the gossip pool but never becomes
// a voter; a good member that joins alongside it is added. The refusal
// is retried on every reconciliation and logged once.
func TestVerifyPeerKeepsMemberOut(t *testing.T) {
	v := newVerifier("evil1")
	logs := map[string]*logBuffer{}
	start := func(id string, expect int, join ...string) *testNode {
		logs[id] = new(logBuffer)
		return startNodeWith(t, nodeOpts{verify: v.verify, logger: logs[id].logger(id)}, id, expect, join...)
	}
	n1 := start("n1", 1)
	waitVoters(t, leader(t, n1), "n1")
	n2 := start("n2", 0, n1.gossip())
	evil := start("evil1", 0, n1.gossip())
	nodes := []*testNode{n1, n2, evil}
	waitVoters(t, leader(t, nodes...), "n1", "n2")
	if _, raft := v.called("n2"); raft != n2.raft {
		t.Errorf("VerifyPeer got raft address %q for n2, want %q", raft, n2.raft)
	}
	waitFor(t, 10*time.Second, "evil1 to be refused again and again", func() bool {
		calls, _ := v.called("evil1")
		return calls >= 5
	})
	l := leader(t, nodes...)
	ln, lc := l.get()
	if got := voters(ln); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("voters %v, want n1 and n2 only", got)
	}
	if servers, _ := ln.Servers(); slices.ContainsFunc(servers, func(s raftnode.Server) bool { return s.ID == "evil1" }) {
		t.Fatalf("evil1 is in the raft configuration: %v", servers)
	}
	if status(lc, "evil1") != StatusAlive {
		t.Fatalf("evil1 is %q in the gossip pool, want alive (the test needs it there)", status(lc, "evil1"))
	}
	total := 0
	for id, buf := range logs {
		n := buf.lines("[WARN]", "not adding member as a voter", "id=evil1")
		if n > 1 {
			t.Errorf("%s logged the refusal of evil1 %d times, want once", id, n)
		}
		total += n
	}
	if total == 0 {
		t.Error("the refusal of evil1 was not logged")
	}

	// Once it passes, it is added: refusals are retried, not remembered.
	v.set("evil1", false)
	waitVoters(t, leader(t, nodes...), "evil1", "n1", "n2")
}

// A member gossip still shows alive but that does not answer (suspect,
// or dead and not yet declared so) is not added, and not verified.
func TestUnreachableMemberNotAdded(t *testing.T) {
	v := newVerifier()
	n1 := startNodeWith(t, nodeOpts{verify: v.verify}, "n1", 1)
	waitVoters(t, leader(t, n1), "n1")
	_, c := n1.get()

	// A UDP address nobody listens on.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := pc.LocalAddr().String()
	pc.Close()
	c.mu.Lock()
	c.members["ghost"] = &member{meta: nodeMeta{ID: "ghost", Raft: "127.0.0.1:1", Instance: "1"}, gossip: silent, status: StatusAlive}
	c.mu.Unlock()

	before := c.reconciles.Load()
	waitFor(t, 10*time.Second, "reconciliation rounds", func() bool { return c.reconciles.Load() >= before+3 })
	n, _ := n1.get()
	if got := voters(n); !slices.Equal(got, []string{"n1"}) {
		t.Fatalf("voters %v, want n1 only", got)
	}
	if calls, _ := v.called("ghost"); calls != 0 {
		t.Errorf("VerifyPeer called %d times for a member that does not answer", calls)
	}
	c.mu.Lock()
	why := c.refused["ghost"]
	c.mu.Unlock()
	if !strings.Contains(why, "gossip ping") {
		t.Errorf("refusal %q, want one about the gossip ping", why)
	}
}

// The bootstrapping node verifies the other servers first and waits
// while one fails, rather than bootstrapping without it.
func TestBootstrapWaitsForVerifiedPeers(t *testing.T) {
	v := newVerifier("n2")
	n1 := startNodeWith(t, nodeOpts{verify: v.verify}, "n1", 2)
	n2 := startNodeWith(t, nodeOpts{verify: v.verify}, "n2", 2, n1.gossip())
	waitFor(t, 10*time.Second, "n1 to try n2 a few times", func() bool {
		calls, _ := v.called("n2")
		return calls >= 3
	})
	for _, tn := range []*testNode{n1, n2} {
		if n, c := tn.get(); n.HasState() || c.Bootstrapped() {
			t.Fatalf("%s bootstrapped although n2 failed verification", tn.id)
		}
	}
	v.set("n2", false)
	waitVoters(t, leader(t, n1, n2), "n1", "n2")
	if _, c := n1.get(); !c.Bootstrapped() {
		t.Error("n1, the lowest id, did not bootstrap")
	}
}

// A process with the gossip key but no lockd identity forges a leave
// intent for a live voter: the leader keeps it (a leave intent removes a
// member only once it is gone from the pool, and never where peers are
// verified).
func TestForgedLeaveIntentRemovesNobody(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	n1 := startNodeWith(t, nodeOpts{key: key}, "n1", 3)
	n2 := startNodeWith(t, nodeOpts{key: key}, "n2", 3, n1.gossip())
	n3 := startNodeWith(t, nodeOpts{key: key}, "n3", 3, n1.gossip(), n2.gossip())
	nodes := []*testNode{n1, n2, n3}
	l := leader(t, nodes...)
	waitVoters(t, l, "n1", "n2", "n3")

	// The attacker: a memberlist with the gossip key, no lockd metadata,
	// no certificate, never a voter candidate.
	ml := startIntruder(t, "mallory", key, nil, l.gossip())
	var victim *memberlist.Node
	var victimMeta nodeMeta
	waitFor(t, 10*time.Second, "victim metadata", func() bool {
		for _, m := range ml.Members() {
			if m.Name != l.id && m.Name != "mallory" && len(m.Meta) > 0 {
				victim = m
				victimMeta, _ = decodeMeta(m.Meta)
				return true
			}
		}
		return false
	})
	msg, _ := json.Marshal(leaveIntent{ID: victimMeta.ID, Instance: victimMeta.Instance})
	var leaderNode *memberlist.Node
	for _, m := range ml.Members() {
		if m.Name == l.id {
			leaderNode = m
		}
	}
	if err := ml.SendReliable(leaderNode, msg); err != nil {
		t.Fatal(err)
	}
	t.Logf("forged leave intent for %s (instance %s)", victim.Name, victimMeta.Instance)

	time.Sleep(3 * time.Second)
	ln, _ := l.get()
	if got := voters(ln); len(got) != 3 {
		t.Fatalf("a gossip-key-only process removed a voter: voters now %v", got)
	}
}

// staticMeta is a memberlist delegate that gossips fixed metadata: an
// intruder's lies.
type staticMeta []byte

func (m staticMeta) NodeMeta(int) []byte           { return m }
func (staticMeta) NotifyMsg([]byte)                {}
func (staticMeta) GetBroadcasts(int, int) [][]byte { return nil }
func (staticMeta) LocalState(bool) []byte          { return nil }
func (staticMeta) MergeRemoteState([]byte, bool)   {}

// A process with the gossip key but no node certificate claims in gossip
// to have raft state and the lowest id: three fresh servers still
// bootstrap, with the intruder present, because claims of members that
// fail VerifyPeer do not count.
func TestUnverifiedClaimsDoNotStopBootstrap(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	v := newVerifier("a-mallory")
	n1 := startNodeWith(t, nodeOpts{key: key, verify: v.verify}, "n1", 3)
	startIntruder(t, "a-mallory", key,
		staticMeta(`{"id":"a-mallory","raft":"127.0.0.1:1","expect":3,"state":true,"inst":"x"}`), n1.gossip())
	n2 := startNodeWith(t, nodeOpts{key: key, verify: v.verify}, "n2", 3, n1.gossip())
	n3 := startNodeWith(t, nodeOpts{key: key, verify: v.verify}, "n3", 3, n1.gossip(), n2.gossip())
	waitVoters(t, leader(t, n1, n2, n3), "n1", "n2", "n3")
}

// startIntruder joins a bare memberlist with the gossip key (no lockd
// identity, no certificate) to the pool at join; meta, if set, is what it
// gossips about itself. It is shut down when the test ends.
func startIntruder(t *testing.T, name string, key []byte, meta memberlist.Delegate, join string) *memberlist.Memberlist {
	t.Helper()
	mlc := memberlist.DefaultLocalConfig()
	mlc.Name = name
	mlc.BindAddr, mlc.BindPort, mlc.AdvertisePort = "127.0.0.1", 0, 0
	mlc.SecretKey = key
	mlc.GossipVerifyIncoming, mlc.GossipVerifyOutgoing = true, true
	mlc.LogOutput = &bytes.Buffer{}
	mlc.Delegate = meta
	ml, err := memberlist.Create(mlc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	if _, err := ml.Join([]string{join}); err != nil {
		t.Fatal(err)
	}
	return ml
}
