//go:build linux

package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
)

// procNode is one lockd process.
type procNode struct {
	id, httpAddr, logPath string
	cmd                   *exec.Cmd
	exited                chan struct{}
}

// procCluster is n lockd processes on loopback formed with
// --bootstrap-expect n.
type procCluster struct {
	t     *testing.T
	nodes []*procNode
}

// raftTiming is the --raft-timing of the cluster tests: elections of a
// few hundred ms keep the tests short; LOCKD_TEST_TIMING overrides.
func raftTiming() string { return lockdtest.TimingFlag(0.5) }

// startCluster starts n nodes; extra flags (e.g. --acl) go to each.
func startCluster(t *testing.T, n int, extra ...string) *procCluster {
	t.Helper()
	if testing.Short() || lockdBin == "" {
		t.Skip("real lockd processes; skipped with -short")
	}
	dir := t.TempDir()
	ports := lockdtest.FreePorts(t, 3*n)
	var gossip []string
	for i := range n {
		gossip = append(gossip, fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]))
	}
	c := &procCluster{t: t}
	t.Cleanup(c.cleanup)
	for i := range n {
		nd := &procNode{id: fmt.Sprintf("n%d", i+1), httpAddr: fmt.Sprintf("127.0.0.1:%d", ports[3*i])}
		nd.logPath = filepath.Join(dir, nd.id+".log")
		others := slices.Delete(slices.Clone(gossip), i, i+1)
		args := []string{
			"--node-id", nd.id, "--data-dir", filepath.Join(dir, nd.id),
			"--http-addr", nd.httpAddr, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]),
			"--gossip-addr", gossip[i], "--join", strings.Join(others, ","),
			"--bootstrap-expect", strconv.Itoa(n), "--raft-timing", raftTiming(),
		}
		args = append(args, extra...)
		logf, err := os.Create(nd.logPath)
		if err != nil {
			t.Fatal(err)
		}
		nd.cmd = exec.Command(lockdBin, args...)
		nd.cmd.Stdout, nd.cmd.Stderr = logf, logf
		err = lockdtest.Start(nd.cmd)
		logf.Close()
		if err != nil {
			t.Fatalf("start %s: %v", nd.id, err)
		}
		nd.exited = make(chan struct{})
		go func(nd *procNode) {
			_ = nd.cmd.Wait()
			lockdtest.Exited(nd.cmd)
			close(nd.exited)
		}(nd)
		c.nodes = append(c.nodes, nd)
	}
	return c
}

// kill SIGKILLs a node and waits for it to be gone.
func (c *procCluster) kill(nd *procNode) {
	c.t.Helper()
	_ = nd.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-nd.exited:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("%s still running 10s after SIGKILL", nd.id)
	}
}

func (c *procCluster) cleanup() {
	for _, nd := range c.nodes {
		_ = nd.cmd.Process.Signal(syscall.SIGKILL)
		<-nd.exited
	}
	if c.t.Failed() {
		for _, nd := range c.nodes {
			c.t.Logf("---- last lines of %s (%s) ----\n%s", nd.id, nd.httpAddr, lockdtest.Tail(nd.logPath, 40))
		}
	}
}

func (c *procCluster) addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.httpAddr)
	}
	return out
}

func (c *procCluster) byAddr(base string) *procNode {
	for _, nd := range c.nodes {
		if "http://"+nd.httpAddr == base {
			return nd
		}
	}
	return nil
}

// waitLeader waits until every node in nodes names the same leader, one
// of nodes, via a client of each node alone.
func (c *procCluster) waitLeader(nodes []*procNode, d time.Duration) string {
	c.t.Helper()
	var leader string
	eventually(c.t, d, "one leader agreed on", func() (ok bool, why string) {
		leader, ok, why = c.agreedLeader(nodes)
		return ok, why
	})
	return leader
}

// agreedLeader returns the leader every node in nodes names, if they name
// one and it is one of them; why says what they named otherwise.
func (c *procCluster) agreedLeader(nodes []*procNode) (leader string, ok bool, why string) {
	seen := map[string]bool{}
	for _, nd := range nodes {
		cl, _ := client.New(nd.httpAddr)
		ctx, cancel := context.WithTimeout(c.t.Context(), time.Second)
		st, err := cl.Status(ctx)
		cancel()
		if err != nil {
			return "", false, err.Error()
		}
		seen[st.Leader.HTTPAddr] = true
		leader = st.Leader.HTTPAddr
	}
	among := slices.ContainsFunc(nodes, func(nd *procNode) bool { return nd.httpAddr == leader })
	return leader, len(seen) == 1 && among, fmt.Sprint(seen)
}

// inUse returns the node the client talks to, once it is the leader every
// node names. Under load an election may leave the client naming no node
// (a call failed and no node named a leader when it looked again) until a
// later call looks again, or still talking to an old leader, now a
// follower that forwards its calls; the latter is returned after 10 s, as
// it is still the node whose death or pause the client must survive.
func (c *procCluster) inUse(cl *client.Client) *procNode {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(c.t.Context(), 2*time.Second)
		_, err := cl.Status(ctx) // a call looks for the leader again when none is known
		cancel()
		nd := c.byAddr(cl.Leader())
		leader, agreed, why := c.agreedLeader(c.nodes)
		if nd != nil && agreed && nd.httpAddr == leader {
			return nd
		}
		if time.Now().After(deadline) {
			if nd == nil {
				c.t.Fatalf("the client names no node as leader (%q, %v); nodes name %s", cl.Leader(), err, why)
			}
			c.t.Logf("the client talks to %s, which the nodes do not all name leader (%s)", nd.id, why)
			return nd
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *procCluster) others(except *procNode) []*procNode {
	var out []*procNode
	for _, nd := range c.nodes {
		if nd != except {
			out = append(out, nd)
		}
	}
	return out
}

// testLogger logs the client's debug lines to t.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// holders returns the sessions holding name and their tokens.
func holders(ctx context.Context, c *client.Client, name string) ([]client.Holder, error) {
	l, err := c.GetLock(ctx, name)
	if err != nil {
		if errorsIs(err, client.ErrLockNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return l.Holders, nil
}

// Killing the node the client talks to (the leader) while one session
// holds a lock and another waits for it: the client fails over, the
// holder's session survives the election, the waiter's request is
// re-attached (not re-proposed), and the lock passes exactly once, with
// a larger token.
func TestFailoverKillLeaderNoLostOrDoubledLock(t *testing.T) {
	t.Parallel() // mostly waiting: overlap with the others
	cl := startCluster(t, 3)
	cl.waitLeader(cl.nodes, 20*time.Second)
	c, err := client.NewWith(cl.addrs(), client.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	holder := newSession(t, c, 5*time.Second)
	waiter := newSession(t, c, 5*time.Second)
	ctx := ctxFor(t, 40*time.Second)
	g1, err := holder.Lock(ctx, "jobs/x")
	if err != nil {
		t.Fatal(err)
	}
	ch := goLock(func() (*client.Grant, error) { return waiter.Lock(ctx, "jobs/x") })
	eventually(t, 5*time.Second, "the waiter queues", func() (bool, string) {
		ids, err := waiters(ctx, c, "jobs/x")
		return err == nil && len(ids) == 1, fmt.Sprint(ids, err)
	})

	inUse := cl.inUse(c)
	killed := time.Now()
	cl.kill(inUse)
	newLeader := cl.waitLeader(cl.others(inUse), 20*time.Second)
	t.Logf("killed %s; new leader %s after %v", inUse.id, newLeader, time.Since(killed).Round(time.Millisecond))

	// Still exactly one holder, the same one, with the same token.
	eventually(t, 15*time.Second, "lock readable after failover", func() (bool, string) {
		hs, err := holders(ctx, c, "jobs/x")
		if err != nil {
			return false, err.Error()
		}
		if len(hs) != 1 || hs[0].Session != holder.ID() || hs[0].Token != g1.Token {
			t.Fatalf("holders after failover %+v; want only session %s with token %d", hs, holder.ID(), g1.Token)
		}
		return true, ""
	})
	if err := holder.Unlock(ctx, "jobs/x"); err != nil {
		t.Fatalf("unlock after failover: %v", err)
	}
	r := recvGrant(t, ch, 20*time.Second, "waiter's Lock across the failover")
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if r.g.Token <= g1.Token {
		t.Fatalf("waiter's token %d not after holder's %d", r.g.Token, g1.Token)
	}
	hs, err := holders(ctx, c, "jobs/x")
	if err != nil || len(hs) != 1 || hs[0].Session != waiter.ID() || hs[0].Count != 1 || hs[0].Token != r.g.Token {
		t.Fatalf("holders at the end %+v, %v; want only the waiter, count 1, token %d", hs, err, r.g.Token)
	}
	valid, _, err := c.Check(ctx, "jobs/x", g1.Token)
	if err != nil || valid {
		t.Fatalf("old token still valid=%v (%v)", valid, err)
	}
	// The leader the survivors name now: under load they may have held
	// another election since the one that followed the kill.
	eventually(t, 5*time.Second, "the client talks to the new leader", func() (bool, string) {
		_, err := c.Status(ctx) // a call lets the client look for the leader again
		now, ok, why := cl.agreedLeader(cl.others(inUse))
		return ok && c.Leader() == "http://"+now, fmt.Sprintf("client leader %q, err %v; nodes name %s", c.Leader(), err, why)
	})
	for _, s := range []*client.Session{holder, waiter} {
		if s.Err() != nil {
			t.Fatalf("session %s lost across the election: %v", s.ID(), s.Err())
		}
	}
}

// holdOnCluster starts a 3-node cluster and a client whose session (TTL
// 4s) holds name; ctx bounds the test.
func holdOnCluster(t *testing.T, name string) (*procCluster, *client.Client, *client.Session, *client.Grant, context.Context) {
	t.Helper()
	cl := startCluster(t, 3)
	cl.waitLeader(cl.nodes, 20*time.Second)
	c, err := client.New(cl.addrs()...)
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, c, 4*time.Second)
	ctx := ctxFor(t, 60*time.Second)
	g, err := s.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return cl, c, s, g, ctx
}

// A leader election the session survives does not close Done: the
// keepalives go to the other nodes meanwhile, for several TTLs after.
func TestSessionSurvivesLeaderElection(t *testing.T) {
	t.Parallel() // mostly waiting: overlap with the others
	cl, c, s, g, ctx := holdOnCluster(t, "jobs/y")
	inUse := cl.inUse(c)
	cl.kill(inUse)
	cl.waitLeader(cl.others(inUse), 20*time.Second)
	select {
	case <-s.Done():
		t.Fatalf("Done closed by an election the session survives: %v", s.Err())
	case <-time.After(3 * s.TTL() / 2):
	}
	info, err := c.GetSession(ctx, s.ID())
	if err != nil || len(info.Held) != 1 || info.Held[0].Token != g.Token {
		t.Fatalf("session after the election: %+v, %v", info, err)
	}
	if valid, _, err := c.Check(ctx, "jobs/y", g.Token); err != nil || !valid {
		t.Fatalf("token after the election: valid=%v, %v", valid, err)
	}
	// The client may name no leader for a while: its last look for one
	// can fall in another election under load; a later call looks again.
	eventually(t, 5*time.Second, "the client names a surviving leader", func() (bool, string) {
		_, err := c.Status(ctx)
		l := c.Leader()
		return cl.byAddr(l) != nil && l != "http://"+inUse.httpAddr, fmt.Sprintf("client leader %q, err %v", l, err)
	})
}

// A leader that hangs (SIGSTOP: a VM or GC pause, or a node cut off with
// its connections left open) must cost a keepalive one bounded attempt,
// not the session: the client fails over to the new leader well within
// the TTL and Done stays open. Found by the Jepsen pause nemesis: one
// keepalive attempt used to wait out the whole TTL on the frozen node.
func TestSessionSurvivesHungLeader(t *testing.T) {
	t.Parallel()
	cl, c, s, g, ctx := holdOnCluster(t, "jobs/hung")
	frozen := cl.inUse(c)
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer frozen.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-s.Done():
		t.Fatalf("Done closed while the leader was frozen: %v", s.Err())
	case <-time.After(3 * s.TTL()):
	}
	info, err := c.GetSession(ctx, s.ID())
	if err != nil || len(info.Held) != 1 || info.Held[0].Token != g.Token {
		t.Fatalf("session with the old leader frozen: %+v, %v", info, err)
	}
}

// bootstrapSettled makes the cluster's management token. A bootstrap of
// unknown outcome (an election cut its answer) is sent again: should the
// first have been applied, the second is refused and the secret, shown
// once, is lost, which no test can settle, so it says so.
func bootstrapSettled(ctx context.Context, t *testing.T, anon *client.Client) *client.Token {
	t.Helper()
	for resent := false; ; resent = true {
		root, err := anon.BootstrapACL(ctx)
		switch {
		case err == nil:
			return root
		case resent && errors.Is(err, client.ErrForbidden):
			t.Fatalf("bootstrap: an attempt of unknown outcome was applied, and its secret is lost: %v", err)
		case ctx.Err() != nil || !errors.Is(err, client.ErrUnknownOutcome) && !errors.Is(err, client.ErrNoLeader):
			t.Fatalf("bootstrap: %v", err)
		}
		t.Logf("bootstrap again: %v", err)
	}
}

// createTokenSettled makes a token. One of unknown outcome is made again:
// should the first have been applied, nobody saw its secret, so it is
// never used.
func createTokenSettled(ctx context.Context, t *testing.T, admin *client.Client, name string, rules ...client.Rule) *client.Token {
	t.Helper()
	for {
		tok, err := admin.CreateToken(ctx, name, rules...)
		switch {
		case err == nil:
			return tok
		case ctx.Err() != nil || !errors.Is(err, client.ErrUnknownOutcome) && !errors.Is(err, client.ErrNoLeader):
			t.Fatalf("create token %q: %v", name, err)
		}
		t.Logf("create token %q again: %v", name, err)
	}
}

// TestRevokeOnACLCluster: three lockd processes run with --acl; a token
// limited to jobs/ locks jobs/db and is refused other/db; an admin's
// revoke closes the holder's Grant.Lost (and runs OnLost) while its
// session lives on, and the waiter gets the lock.
func TestRevokeOnACLCluster(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3, "--acl")
	cl.waitLeader(cl.nodes, 20*time.Second)
	ctx := ctxFor(t, 60*time.Second)
	anon, err := client.New(cl.addrs()...)
	if err != nil {
		t.Fatal(err)
	}
	root := bootstrapSettled(ctx, t, anon)
	admin, _ := client.NewWith(cl.addrs(), client.WithToken(root.Secret))
	tok := createTokenSettled(ctx, t, admin, "jobs", client.Rule{Prefix: "jobs/", Access: "write"})
	// The holder knows one follower only: its keepalives, forwarded to
	// the leader, still carry the revocation back.
	leader := cl.waitLeader(cl.nodes, 20*time.Second)
	follower := cl.others(cl.byAddr("http://" + leader))[0]
	jobs, _ := client.NewWith([]string{follower.httpAddr}, client.WithToken(tok.Secret))
	lost := make(chan error, 4)
	holder := newSession(t, jobs, 3*time.Second, client.WithOnLost(func(_ string, _ uint64, err error) { lost <- err }))
	if _, err := holder.TryLock(ctx, "other/db"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("lock outside jobs/: %v, want ErrForbidden", err)
	}
	if _, err := anon.NewSession(ctx, 3*time.Second); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("session without a token: %v, want ErrUnauthorized", err)
	}
	g, err := holder.Lock(ctx, "jobs/db")
	if err != nil {
		t.Fatal(err)
	}
	waiter := newSession(t, jobs, 10*time.Second)
	ch := goLock(func() (*client.Grant, error) { return waiter.Lock(ctx, "jobs/db") })
	eventually(t, 10*time.Second, "the waiter queued", func() (bool, string) {
		ids, err := waiters(ctx, admin, "jobs/db")
		return len(ids) == 1, fmt.Sprint(ids, err)
	})
	if revoked, err := admin.Revoke(ctx, "jobs/db"); err != nil || len(revoked) != 1 || revoked[0].Token != g.Token {
		t.Fatalf("revoke: %+v, %v", revoked, err)
	}
	if r := recvGrant(t, ch, 20*time.Second, "the waiter"); r.err != nil || r.g.Token <= g.Token {
		t.Fatalf("waiter: %+v, %v", r.g, r.err)
	}
	select {
	case <-g.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("the holder was not told it lost jobs/db")
	}
	if err := <-lost; !errors.Is(err, client.ErrRevoked) || !errors.Is(g.LostErr(), client.ErrRevoked) {
		t.Fatalf("OnLost %v, LostErr %v; want ErrRevoked", err, g.LostErr())
	}
	if holder.Err() != nil {
		t.Fatalf("the revoke ended the holder's session: %v", holder.Err())
	}
}

// TestQuorumLossAnsweredAtOnce: with two of three nodes killed and the
// survivor's gossip showing them gone, the survivor answers no_leader with
// quorum_lost, and a call returns that answer as soon as every endpoint
// has either said so or refused the connection — long before its own
// deadline, though the policy would retry until it — whether the client
// was given the survivor alone or every address.
func TestQuorumLossAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 3)
	cl.waitLeader(cl.nodes, 30*time.Second)
	survivor := cl.nodes[0]
	for _, nd := range cl.others(survivor) {
		cl.kill(nd)
	}
	probe, err := client.New(survivor.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the survivor's gossip to see the others gone", func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		st, err := probe.Status(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if m.ID != survivor.id && m.Status == "alive" {
				return false, fmt.Sprintf("%+v", st.Members)
			}
		}
		return true, ""
	})
	want := "no leader: 1 of 3 voters reachable (" + survivor.id + "); a majority of 2 is needed"
	for _, eps := range [][]string{{survivor.httpAddr}, cl.addrs()} {
		// MaxElapsed 0: the policy alone would retry until ctx ends.
		c, err := client.NewWith(eps, client.WithRetryPolicy(client.RetryPolicy{}), client.WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
		start := time.Now()
		_, err = c.NewSession(ctx, 10*time.Second)
		took, deadline := time.Since(start), ctx.Err()
		cancel()
		t.Logf("NewSession via %v without quorum: %v after %v", eps, err, took.Round(time.Millisecond))
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Code != wire.CodeNoLeader || !ae.QuorumLost || !strings.Contains(ae.Message, want) {
			t.Errorf("NewSession via %v: %v; want no_leader with quorum_lost and %q", eps, err, want)
		}
		if deadline != nil {
			t.Errorf("NewSession via %v returned only at its deadline: the quorum-lost answer was retried", eps)
		}
	}
}
