package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

func testLogger(id string) hclog.Logger {
	lvl := os.Getenv("LOCKD_TEST_LOG")
	if lvl == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.LevelFromString(lvl), Output: os.Stderr})
}

// fastGossip shortens memberlist's loopback timings so failures are
// detected in a few seconds, with enough slack for -race on a loaded
// machine.
func fastGossip(c *memberlist.Config) {
	c.ProbeInterval = 400 * time.Millisecond
	c.ProbeTimeout = 300 * time.Millisecond
	c.GossipInterval = 50 * time.Millisecond
	c.SuspicionMult = 3
	c.PushPullInterval = 2 * time.Second
	c.TCPTimeout = 2 * time.Second
}

// testNode is one lockd node: raftnode, an HTTP address, and the cluster.
type testNode struct {
	t      *testing.T
	id     string
	dir    string
	raft   string // raft address, kept across restarts
	bind   string // gossip address, kept across restarts
	expect int
	opts   nodeOpts

	srv     *httptest.Server
	mu      sync.Mutex
	node    *raftnode.Node
	cluster *Cluster
}

// nodeOpts are the Config settings some tests give a node.
type nodeOpts struct {
	key    []byte                                           // Config.GossipKey
	verify func(ctx context.Context, id, raft string) error // Config.VerifyPeer
	logger hclog.Logger                                     // the cluster's logger, if set
	log    int                                              // Config.LogFormat
}

// startNode starts a node that joins the given gossip addresses.
func startNode(t *testing.T, id string, expect int, join ...string) *testNode {
	t.Helper()
	return startNodeWith(t, nodeOpts{}, id, expect, join...)
}

// startNodeWith is startNode with options.
func startNodeWith(t *testing.T, opts nodeOpts, id string, expect int, join ...string) *testNode {
	t.Helper()
	// Ports outside the ephemeral range, claimed for the test: a node
	// restarts on its ports, which, drawn by a bind to port 0, another
	// process could have taken while the node was stopped.
	ports := lockdtest.FreePorts(t, 2)
	tn := &testNode{t: t, id: id, dir: t.TempDir(), expect: expect, opts: opts,
		raft: fmt.Sprintf("127.0.0.1:%d", ports[0]), bind: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	tn.srv = httptest.NewServer(http.NotFoundHandler()) // an HTTP address for the gossip metadata
	t.Cleanup(func() {
		tn.kill()
		tn.srv.Close()
	})
	tn.start(join...)
	return tn
}

func (tn *testNode) start(join ...string) {
	tn.t.Helper()
	dir := new(Directory)
	node, err := raftnode.Open(raftnode.Config{
		ID: tn.id, DataDir: tn.dir, RaftBind: tn.raft,
		Logger: testLogger(tn.id), Timing: lockdtest.Timing(0.5),
	})
	if err != nil {
		tn.t.Fatalf("open %s: %v", tn.id, err)
	}
	tn.raft = node.RaftAddr()
	logger := tn.opts.logger
	if logger == nil {
		logger = testLogger(tn.id).Named("cluster")
	}
	c, err := Start(Config{
		ID: tn.id, GossipBind: tn.bind, HTTPAddr: tn.srv.Listener.Addr().String(),
		Join: join, BootstrapExpect: tn.expect, Logger: logger,
		GossipKey: tn.opts.key, VerifyPeer: tn.opts.verify, LogFormat: tn.opts.log,
		LocalTimings: true, Tune: fastGossip,
		ReconcileInterval: 200 * time.Millisecond, RetryJoinInterval: 100 * time.Millisecond,
		Directory: dir,
	}, node)
	if err != nil {
		_ = node.Shutdown(context.Background())
		tn.t.Fatalf("start cluster %s: %v", tn.id, err)
	}
	tn.bind = c.GossipAddr()
	tn.mu.Lock()
	tn.node, tn.cluster = node, c
	tn.mu.Unlock()
}

// kill stops the node without leaving: to the others it failed.
func (tn *testNode) kill() {
	tn.mu.Lock()
	n, c := tn.node, tn.cluster
	tn.node, tn.cluster = nil, nil
	tn.mu.Unlock()
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		tn.t.Errorf("shutdown %s: %v", tn.id, err)
	}
	if err := c.Shutdown(); err != nil {
		tn.t.Errorf("cluster shutdown %s: %v", tn.id, err)
	}
}

func (tn *testNode) get() (*raftnode.Node, *Cluster) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.node, tn.cluster
}

func (tn *testNode) gossip() string {
	_, c := tn.get()
	return c.GossipAddr()
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leader waits for one of nodes to lead and returns it.
func leader(t *testing.T, nodes ...*testNode) *testNode {
	t.Helper()
	var l *testNode
	waitFor(t, 15*time.Second, "a leader", func() bool {
		for _, tn := range nodes {
			if n, _ := tn.get(); n != nil && n.Status().State == "leader" {
				l = tn
				return true
			}
		}
		return false
	})
	return l
}

// voters returns the sorted ids of the voters in n's configuration.
func voters(n *raftnode.Node) []string {
	servers, err := n.Servers()
	if err != nil {
		return nil
	}
	var ids []string
	for _, s := range servers {
		if s.Voter {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func waitVoters(t *testing.T, l *testNode, want ...string) {
	t.Helper()
	waitFor(t, 15*time.Second, "voters "+strings.Join(want, ","), func() bool {
		n, _ := l.get()
		return slices.Equal(voters(n), want)
	})
}

func status(c *Cluster, id string) string {
	for _, m := range c.Members() {
		if m.ID == id {
			return m.Status
		}
	}
	return ""
}

// formCluster starts n1..n3 with --bootstrap-expect 3, n2 and n3 joining
// n1 (and n1 joining them back, as a static join list would), and waits
// for three voters.
func formCluster(t *testing.T) []*testNode {
	t.Helper()
	n1 := startNode(t, "n1", 3)
	n2 := startNode(t, "n2", 3, n1.gossip())
	n3 := startNode(t, "n3", 3, n1.gossip(), n2.gossip())
	nodes := []*testNode{n1, n2, n3}
	l := leader(t, nodes...)
	waitVoters(t, l, "n1", "n2", "n3")
	return nodes
}

func propose(t *testing.T, n *raftnode.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		res, _, err := n.Propose(ctx, &lockstate.CreateSession{TTL: time.Minute})
		// A session more or less does not matter here: retry whatever
		// may not have committed.
		if (errors.Is(err, raftnode.ErrNoLeader) || errors.Is(err, raftnode.ErrUnknownOutcome)) && ctx.Err() == nil {
			continue
		}
		if err != nil || res.Err != nil {
			t.Fatalf("propose: %v %v", err, res)
		}
		return
	}
}

func TestBootstrapExpectJoinAndLeave(t *testing.T) {
	nodes := formCluster(t)
	var boots []string
	for _, tn := range nodes {
		if _, c := tn.get(); c.Bootstrapped() {
			boots = append(boots, tn.id)
		}
	}
	if !slices.Equal(boots, []string{"n1"}) {
		t.Fatalf("bootstrapped by %v, want exactly n1 (the lowest id)", boots)
	}
	// Any node accepts writes (followers forward through the addresses
	// gossip published).
	for _, tn := range nodes {
		n, _ := tn.get()
		propose(t, n)
	}

	// A later node without --bootstrap-expect is added as a voter.
	n4 := startNode(t, "n4", 0, nodes[1].gossip())
	all := append(slices.Clone(nodes), n4)
	waitVoters(t, leader(t, all...), "n1", "n2", "n3", "n4")
	if _, c := n4.get(); c.Bootstrapped() {
		t.Error("n4 bootstrapped")
	}
	n, c := n4.get()
	propose(t, n)
	waitFor(t, 10*time.Second, "n4 to see four members alive", func() bool {
		ms := c.Members()
		for _, m := range ms {
			if m.Status != StatusAlive {
				return false
			}
		}
		return len(ms) == 4
	})
	for _, m := range c.Members() {
		if m.HTTPAddr == "" || m.RaftAddr == "" || m.GossipAddr == "" {
			t.Errorf("member %+v", m)
		}
	}

	// A node that leaves gracefully is removed.
	if err := c.Leave(5 * time.Second); err != nil {
		t.Fatalf("leave: %v", err)
	}
	l := leader(t, nodes...)
	waitVoters(t, l, "n1", "n2", "n3")
	_, lc := l.get()
	waitFor(t, 5*time.Second, "n4 to be seen as left", func() bool { return status(lc, "n4") == StatusLeft })
	n4.kill()

	// The leader leaving removes itself and hands over.
	_, c = l.get()
	if err := c.Leave(5 * time.Second); err != nil {
		t.Fatalf("leader leave: %v", err)
	}
	var rest []*testNode
	for _, tn := range nodes {
		if tn != l {
			rest = append(rest, tn)
		}
	}
	l2 := leader(t, rest...)
	var want []string
	for _, tn := range rest {
		want = append(want, tn.id)
	}
	waitVoters(t, l2, want...)
	n, _ = l2.get()
	propose(t, n)
}

func TestKilledNodeStaysAndRejoins(t *testing.T) {
	nodes := formCluster(t)
	l := leader(t, nodes...)
	var victim *testNode
	for _, tn := range nodes {
		if tn != l {
			victim = tn
			break
		}
	}
	victim.kill()
	_, lc := l.get()
	waitFor(t, 15*time.Second, victim.id+" to be seen as dead", func() bool { return status(lc, victim.id) == StatusDead })
	// Let the leader (whichever it is by now) reconcile a few times after
	// the failure.
	before := reconciles(nodes)
	waitFor(t, 10*time.Second, "reconciliation rounds", func() bool { return reconciles(nodes) >= before+3 })
	ln, _ := leader(t, nodes...).get()
	if got := voters(ln); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("voters after a failure: %v, want all three", got)
	}
	propose(t, ln)

	// Restarted from its data dir with the same flags, it rejoins without
	// bootstrapping and catches up.
	victim.start(l.gossip())
	_, vc := victim.get()
	waitFor(t, 15*time.Second, victim.id+" alive again", func() bool { return status(lc, victim.id) == StatusAlive })
	waitFor(t, 30*time.Second, victim.id+" caught up", func() bool {
		vn, _ := victim.get()
		ln, _ := leader(t, nodes...).get()
		return vn.FSM().AppliedIndex() == ln.FSM().AppliedIndex() && vn.FSM().Digest() == ln.FSM().Digest()
	})
	if vc.Bootstrapped() {
		t.Error("restarted node bootstrapped again")
	}
	vn, _ := victim.get()
	propose(t, vn)
}

// Nodes that disagree on --bootstrap-expect do not bootstrap.
func TestConflictingExpect(t *testing.T) {
	n1 := startNode(t, "n1", 2)
	n2 := startNode(t, "n2", 3, n1.gossip())
	_, c1 := n1.get()
	_, c2 := n2.get()
	waitFor(t, 10*time.Second, "both members seen", func() bool {
		return status(c1, "n2") == StatusAlive && status(c2, "n1") == StatusAlive
	})
	waitFor(t, 10*time.Second, "the conflict to be noticed", func() bool {
		c1.mu.Lock()
		defer c1.mu.Unlock()
		return strings.Contains(c1.lastNote, "expects 3 servers")
	})
	for _, tn := range []*testNode{n1, n2} {
		n, c := tn.get()
		if c.Bootstrapped() || n.HasState() {
			t.Errorf("%s bootstrapped despite conflicting expect values", tn.id)
		}
	}
}

func TestDirectory(t *testing.T) {
	var d Directory
	if _, ok := d.HTTPAddr("n1"); ok {
		t.Fatal("an unset directory knows n1")
	}
	n1 := startNode(t, "n1", 0)
	_, c := n1.get()
	d.Set(c)
	if addr, ok := d.HTTPAddr("n1"); !ok || addr != n1.srv.Listener.Addr().String() {
		t.Fatalf("HTTPAddr(n1) = %q %v", addr, ok)
	}
	if _, ok := d.HTTPAddr("nobody"); ok {
		t.Fatal("knows an unknown node")
	}
}
