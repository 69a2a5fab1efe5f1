package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/lockstate"
)

// testTiming scales raft's timeouts for loopback tests: 500ms heartbeat
// and election timeouts, 250ms lease, 25ms commit. At a quarter of raft's
// defaults, followers of a two-core machine at load 20 (the jepsen smoke
// beside go test) missed heartbeats and leaders changed mid-test.
// LOCKD_TEST_TIMING (lockdtest.Timing) overrides it.
var testTiming = lockdtest.Timing(0.5)

// testLogger is silent unless LOCKD_TEST_LOG is set (e.g. to "debug").
func testLogger(t testing.TB, id string) hclog.Logger {
	lvl := os.Getenv("LOCKD_TEST_LOG")
	if lvl == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.LevelFromString(lvl), Output: os.Stderr})
}

// testCluster is n real nodes on loopback: raft and forwarding over each
// node's port.
type testCluster struct {
	t     testing.TB
	tweak func(*Config)

	mu    sync.Mutex // nodes: the join rule reads it from the node port's goroutines
	nodes []*testNode
}

type testNode struct {
	c        *testCluster
	id       string
	dir      string
	raftAddr string

	mu   sync.Mutex
	node *Node // nil while stopped
}

// newTestCluster starts n nodes, bootstraps them from the first and waits
// for a ready leader.
func newTestCluster(t testing.TB, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, tweak: tweak}
	// Ports outside the ephemeral range, claimed for the test: a node
	// restarts on its port, which, drawn by a bind to port 0, another
	// process could have taken while the node was stopped.
	ports := lockdtest.FreePorts(t, n)
	for i := range n {
		tn := &testNode{c: c, id: fmt.Sprintf("n%d", i+1), dir: t.TempDir(), raftAddr: fmt.Sprintf("127.0.0.1:%d", ports[i])}
		c.mu.Lock()
		c.nodes = append(c.nodes, tn)
		c.mu.Unlock()
		tn.start()
	}
	t.Cleanup(c.close)
	servers := make([]Server, n)
	for i, tn := range c.nodes {
		servers[i] = Server{ID: tn.id, Addr: tn.raftAddr, Voter: true}
	}
	if err := c.nodes[0].get().Bootstrap(servers); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	c.leader()
	return c
}

func (c *testCluster) close() {
	for _, tn := range c.nodes {
		tn.stop()
	}
}

// start opens the node on its data dir (and, after the first start, its
// raft address, which the configuration names).
func (tn *testNode) start() {
	tn.c.t.Helper()
	cfg := Config{
		ID:       tn.id,
		DataDir:  tn.dir,
		RaftBind: tn.raftAddr,
		Logger:   testLogger(tn.c.t, tn.id),
		Timing:   testTiming,
		// $LOCKD_TEST_RAFT_LOG=bolt runs the tests that do not choose a
		// log store on bolt (the default: raft-wal).
		LogStore: os.Getenv("LOCKD_TEST_RAFT_LOG"),
	}
	if tn.c.tweak != nil {
		tn.c.tweak(&cfg)
	}
	n, err := Open(cfg)
	if err != nil {
		tn.c.t.Fatalf("open %s: %v", tn.id, err)
	}
	tn.raftAddr = n.RaftAddr()
	n.SetJoinRule(tn.c.joinPeer(tn.id))
	tn.mu.Lock()
	tn.node = n
	tn.mu.Unlock()
}

// joinPeer is the test cluster's join rule for node self: the other nodes
// of the cluster that run (the one that bootstraps is among them), as
// gossip's rule takes the alive members.
func (c *testCluster) joinPeer(self string) func(string) bool {
	return func(name string) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, tn := range c.nodes {
			if tn.id == name && name != self {
				return tn.get() != nil
			}
		}
		return false
	}
}

// stop shuts the node down (as on SIGTERM: leadership handed over).
func (tn *testNode) stop() {
	tn.mu.Lock()
	n := tn.node
	tn.node = nil
	tn.mu.Unlock()
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	// A shutdown that waits out its budget is rare and timing-bound: keep
	// the goroutines of the moment it stalls, so the log says where.
	var stalled bytes.Buffer
	dumped := make(chan struct{})
	dump := time.AfterFunc(4*time.Second, func() {
		pprof.Lookup("goroutine").WriteTo(&stalled, 1)
		close(dumped)
	})
	if err := n.Shutdown(ctx); err != nil {
		tn.c.t.Errorf("shutdown %s: %v", tn.id, err)
	}
	if !dump.Stop() {
		<-dumped
		tn.c.t.Logf("shutdown of %s stalled; goroutines after 4s:\n%s", tn.id, stalled.String())
	}
	if d := time.Since(start); d > 2*time.Second {
		tn.c.t.Logf("shutdown of %s took %v", tn.id, d)
	}
}

func (tn *testNode) get() *Node {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.node
}

// live returns the running nodes.
func (c *testCluster) live() []*testNode {
	var out []*testNode
	for _, tn := range c.nodes {
		if tn.get() != nil {
			out = append(out, tn)
		}
	}
	return out
}

// leader waits for a running node that leads with its duties ready: up
// to 30 s, since under provoked elections (LOCKD_TEST_TIMING) on a loaded
// machine leaders come and go many times before one stays ready.
func (c *testCluster) leader() *testNode {
	c.t.Helper()
	var l *testNode
	waitFor(c.t, 30*time.Second, "a ready leader", func() bool {
		l = c.readyLeader()
		return l != nil
	})
	return l
}

// readyLeader returns the running node that leads with its duties ready,
// or nil.
func (c *testCluster) readyLeader() *testNode {
	for _, tn := range c.live() {
		if n := tn.get(); n != nil && n.Status().State == "leader" && n.lead.Load() != nil {
			return tn
		}
	}
	return nil
}

// followers returns the running nodes other than l.
func (c *testCluster) followers(l *testNode) []*testNode {
	var out []*testNode
	for _, tn := range c.live() {
		if tn != l {
			out = append(out, tn)
		}
	}
	return out
}

// follower waits for a running node other than l that names l as its
// leader, and returns it. l is ready once one follower has answered it; a
// node that voted for l learns that l leads only from l's first
// AppendEntries to it, which may come later. Calls that do not retry
// (AwaitOnLeader) need a follower that knows.
func (c *testCluster) follower(l *testNode) *testNode {
	c.t.Helper()
	var f *testNode
	waitFor(c.t, 10*time.Second, "a follower that knows "+l.id+" leads", func() bool {
		for _, tn := range c.followers(l) {
			if _, id := tn.get().raft.LeaderWithID(); string(id) == l.id {
				f = tn
				return true
			}
		}
		return false
	})
	return f
}

// onLeader runs op, which must be idempotent, on the node that leads,
// again on the next one while op answers that leadership moved before it
// was done.
func (c *testCluster) onLeader(op func(*Node) error) error {
	c.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		err := op(c.leader().get())
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipLost) &&
			!errors.Is(err, raft.ErrLeadershipTransferInProgress) || time.Now().After(deadline) {
			return err
		}
	}
}

// converged waits until every running node has applied the same index as
// the leader and has the same table digest, and returns that index.
func (c *testCluster) converged() uint64 {
	c.t.Helper()
	var index uint64
	waitFor(c.t, 30*time.Second, "all nodes at the leader's index with one digest", func() bool {
		l := c.readyLeader()
		if l == nil {
			return false
		}
		index = l.get().FSM().AppliedIndex()
		digest := l.get().FSM().Digest()
		for _, tn := range c.live() {
			n := tn.get()
			if n.FSM().AppliedIndex() != index || n.FSM().Digest() != digest {
				return false
			}
		}
		return true
	})
	return index
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// propose commits cmd through n, retrying on ErrNoLeader, and on
// ErrUnknownOutcome for an acquire with a request id or a deny (both
// idempotent: the API retries the first); it fails the test on any other
// error or a domain error. Sessions are created with createSession, which
// settles an unknown outcome.
func propose(t testing.TB, n *Node, cmd lockstate.Command) (*lockstate.Result, uint64) {
	t.Helper()
	res, index := proposeSettled(t, n, cmd)
	if res.Err != nil {
		t.Fatalf("propose %T: %v", cmd, res.Err)
	}
	return res, index
}

// proposeSettled is propose for a command the table may refuse: it
// returns the result, refusal or not, and the entry's index.
func proposeSettled(t testing.TB, n *Node, cmd lockstate.Command) (*lockstate.Result, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		res, index, err := n.Propose(ctx, cmd)
		if retryableInTest(cmd, err) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			t.Fatalf("propose %T: %v", cmd, err)
		}
		return res, index
	}
}

func retryableInTest(cmd lockstate.Command, err error) bool {
	if errors.Is(err, ErrNoLeader) {
		return true
	}
	if !errors.Is(err, ErrUnknownOutcome) {
		return false
	}
	switch c := cmd.(type) {
	case *lockstate.Acquire:
		return c.RequestID != ""
	case *lockstate.DenyCert:
		return true // a serial denied twice stays denied once
	}
	return false
}

// sessionNames numbers the sessions createSession names.
var sessionNames atomic.Int64

// createSession opens a session through n and returns its id. An election
// under load (the leader's lease runs out while it commits) answers
// ErrUnknownOutcome; a repeat could open a second session, which tests
// that count sessions would see. So each session gets a name of its own,
// by which proposeOnce settles an unknown outcome.
func createSession(t testing.TB, n *Node, ttl time.Duration) lockstate.SessionID {
	t.Helper()
	name := fmt.Sprintf("test-session-%d", sessionNames.Add(1))
	var id lockstate.SessionID
	res := proposeOnce(t, n, &lockstate.CreateSession{Name: name, TTL: ttl}, func() (took bool) {
		id, took = sessionNamed(n, name)
		return took
	})
	if res != nil {
		return res.Session
	}
	return id
}

// proposeOnce commits cmd, which must not be applied twice, through n,
// retrying on ErrNoLeader. After an unknown outcome, took (called once
// settled, see settle) reports whether an attempt applied cmd, which is
// then proposed again only if none did. It returns cmd's result, or nil
// when an earlier attempt applied it; it fails the test on any other
// error or a domain error.
func proposeOnce(t testing.TB, n *Node, cmd lockstate.Command, took func() bool) *lockstate.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		res, _, err := n.Propose(ctx, cmd)
		switch {
		case err == nil && res.Err != nil:
			t.Fatalf("propose %T: %v", cmd, res.Err)
		case err == nil:
			return res
		case ctx.Err() == nil && errors.Is(err, ErrNoLeader):
			continue
		case ctx.Err() == nil && errors.Is(err, ErrUnknownOutcome):
			settle(ctx, t, n, fmt.Sprintf("%T", cmd))
			if took() {
				return nil
			}
			continue
		}
		t.Fatalf("propose %T: %v", cmd, err)
	}
}

// settle returns once a read index through n succeeds, failing the test
// when ctx ends first. An unknown outcome in these tests comes from an
// election (the leader's lease ran out while it committed): the read needs
// a leader that committed in its own term, and an entry of an older term
// that this leader does not hold can never commit after that, so what n's
// table shows then settles the proposal. An answer lost on a cut forward
// in a steady term would not be settled so (the entry may commit after
// the read); these tests cut no forwards.
func settle(ctx context.Context, t testing.TB, n *Node, what string) {
	t.Helper()
	for {
		err := n.ReadIndex(ctx)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("settle %s: %v", what, err)
		}
	}
}

// sessionNamed returns the session named name in n's table.
func sessionNamed(n *Node, name string) (lockstate.SessionID, bool) {
	var (
		id    lockstate.SessionID
		found bool
	)
	n.FSM().Read(func(tab *lockstate.Table) {
		for _, s := range tab.Sessions() {
			if s.Name == name {
				id, found = s.ID, true
			}
		}
	})
	return id, found
}

func acquire(t testing.TB, n *Node, s lockstate.SessionID, name, reqID string, wait, holdTTL time.Duration) *lockstate.RequestInfo {
	t.Helper()
	res, _ := propose(t, n, &lockstate.Acquire{
		Session:   s,
		RequestID: reqID,
		Locks:     []lockstate.LockSpec{{Name: name, Mode: lockstate.Write}},
		Wait:      wait,
		HoldTTL:   holdTTL,
	})
	return res.Request
}

// request reads a request's state from n's table, of whichever session
// has one with id: tests give each id to one session.
func request(n *Node, id string) (lockstate.RequestInfo, bool) {
	var (
		info lockstate.RequestInfo
		ok   bool
	)
	n.FSM().Read(func(t *lockstate.Table) {
		for _, s := range t.Sessions() {
			if info, ok = t.Request(s.ID, id); ok {
				return
			}
		}
	})
	return info, ok
}

func hasSession(n *Node, id lockstate.SessionID) bool {
	var ok bool
	n.FSM().Read(func(t *lockstate.Table) { ok = t.HasSession(id) })
	return ok
}
