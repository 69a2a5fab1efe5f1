package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

func TestProposeOnEveryNode(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	for _, tn := range c.nodes {
		id := createSession(t, tn.get(), time.Minute)
		if id == 0 {
			t.Fatalf("%s: no session id", tn.id)
		}
	}
	c.converged()

	// The statuses agree on the leader that leads now: an election under
	// load may have replaced the one of the setup, and a node that voted
	// names the new one only once it has heard from it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		differs := statusesAgree(c)
		if differs == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s the statuses still differ: %s", differs)
		}
	}
	for _, tn := range c.nodes {
		if st := tn.get().Status(); st.ID != tn.id || st.Term == 0 || st.CommitIndex == 0 || st.AppliedIndex == 0 {
			t.Errorf("%s: status %+v", tn.id, st)
		}
	}
}

// statusesAgree returns "" when the nodes' statuses show one leader, the
// ready one, and two followers, all naming it with its raft address, or
// else what differs.
func statusesAgree(c *testCluster) string {
	l := c.readyLeader()
	if l == nil {
		return "no ready leader"
	}
	states := map[string]int{}
	for _, tn := range c.nodes {
		st := tn.get().Status()
		states[st.State]++
		if st.LeaderID != l.id || st.LeaderRaft != l.raftAddr {
			return fmt.Sprintf("%s: leader %s at %s, want %s at %s", tn.id, st.LeaderID, st.LeaderRaft, l.id, l.raftAddr)
		}
	}
	if states["leader"] != 1 || states["follower"] != 2 {
		return fmt.Sprintf("states %v, want one leader and two followers", states)
	}
	return ""
}

// The leader stamps every command with its own clock, also a command a
// follower forwarded: a follower whose clock is far behind cannot move
// the table's time.
func TestLeaderStampsTime(t *testing.T) {
	past := time.Unix(1000, 0)
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.ID != "n1" { // n1 bootstraps and becomes the first leader
			cfg.Now = func() time.Time { return past }
		}
	})
	l := c.leader()
	if l.id != "n1" {
		t.Skipf("leader is %s, not n1", l.id)
	}
	before := time.Now().UnixNano()
	createSession(t, c.followers(l)[0].get(), time.Minute)
	c.converged()
	for _, tn := range c.nodes {
		var clock int64
		tn.get().FSM().Read(func(t *lockstate.Table) { clock = t.Clock() })
		if clock < before {
			t.Errorf("%s: table clock %d is before the proposal (%d): the follower's clock was used", tn.id, clock, before)
		}
	}
}

// Many goroutines propose at once through every node; all commit. Each
// proposal is an acquire with its own request id, so one whose outcome is
// unknown (leadership moved) is retried as the API would.
func TestConcurrentProposals(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	const workers, each = 48, 15
	var wg sync.WaitGroup
	tokens := make(chan uint64, workers*each)
	for w := range workers {
		n := c.nodes[w%len(c.nodes)].get()
		s := createSession(t, n, time.Hour)
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				res, index, err := n.Propose(context.Background(), &lockstate.Acquire{
					Session: s, RequestID: id,
					Locks: []lockstate.LockSpec{{Name: "concurrent/" + id, Mode: lockstate.Write}},
				})
				for errors.Is(err, ErrUnknownOutcome) || errors.Is(err, ErrNoLeader) {
					res, index, err = n.Propose(context.Background(), &lockstate.Acquire{
						Session: s, RequestID: id,
						Locks: []lockstate.LockSpec{{Name: "concurrent/" + id, Mode: lockstate.Write}},
					})
				}
				switch {
				case err != nil:
					t.Errorf("propose: %v", err)
					return
				case res.Err != nil || res.Request.Status != lockstate.Granted:
					t.Errorf("acquire %s: %+v", id, res)
					return
				case index == 0:
					t.Errorf("acquire %s: no index", id)
				}
				tokens <- res.Request.Token
			}
		})
	}
	wg.Wait()
	close(tokens)
	seen := map[uint64]bool{}
	for tok := range tokens {
		if seen[tok] {
			t.Errorf("token %d granted twice", tok)
		}
		seen[tok] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("%d grants, want %d", len(seen), workers*each)
	}
	c.converged()
	for _, tn := range c.nodes {
		var holds int
		tn.get().FSM().Read(func(t *lockstate.Table) { holds = t.Stats().Holds })
		if holds != workers*each {
			t.Errorf("%s: %d holds, want %d", tn.id, holds, workers*each)
		}
	}
}

// A read on a follower after ReadIndex sees a write another node committed
// just before it.
func TestReadIndexOnFollower(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	fs := c.followers(l)
	writers := []*testNode{l, fs[0], fs[1]}
	for i := range 30 {
		w := writers[i%3]
		r := fs[(i+1)%2]
		if r == w {
			r = fs[i%2]
		}
		id := createSession(t, w.get(), time.Minute)
		if err := r.get().ReadIndex(context.Background()); err != nil {
			t.Fatalf("read index on %s: %v", r.id, err)
		}
		if !hasSession(r.get(), id) {
			t.Fatalf("round %d: %s does not see session %d written through %s", i, r.id, id, w.id)
		}
	}
	// The leader's read index stays reachable with only non-command
	// entries (no-op, barrier) after the last command.
	if err := l.get().ReadIndex(context.Background()); err != nil {
		t.Fatalf("read index on the leader: %v", err)
	}
}

// A read index with nothing but the leader's no-op and barrier in the log
// must not wait for an index the FSM never reaches.
func TestReadIndexEmptyTable(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	for _, tn := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := tn.get().ReadIndex(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read index on %s: %v", tn.id, err)
		}
	}
}

// A session without keepalives expires through the leader, and the lock
// it held goes to the waiter at the same index on every node.
func TestSessionExpiryHandsLockToWaiter(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	f := c.followers(l)[0].get()

	// The waiter must queue before the dying session expires: three
	// proposals, which a loaded -race machine could make last a second
	// (lockstate.MinTTL).
	const dyingTTL = 3 * time.Second
	start := time.Now()
	dying := createSession(t, f, dyingTTL)
	waiter := createSession(t, f, time.Hour)
	held := acquire(t, f, dying, "jobs/backup", "held", 0, 0)
	if held.Status != lockstate.Granted {
		t.Fatalf("holder: %s", held.Status)
	}
	if w := acquire(t, f, waiter, "jobs/backup", "waiting", time.Hour, 0); w.Status != lockstate.Pending {
		t.Fatalf("waiter: %s", w.Status)
	}

	// Each new leader gives every session a full TTL again (it cannot
	// know when the last keepalive reached the old one): while leaders
	// change (provoked elections), expiry waits for a leader that lasts
	// the TTL.
	waitFor(t, time.Minute, "the waiter to be granted", func() bool {
		info, ok := request(l.get(), "waiting")
		return ok && info.Status == lockstate.Granted
	})
	if elapsed := time.Since(start); elapsed < dyingTTL {
		t.Errorf("session expired after %v, before its TTL %v", elapsed, dyingTTL)
	}
	c.converged()

	want, _ := request(l.get(), "waiting")
	if want.Token <= held.Token {
		t.Errorf("waiter's token %d is not above the holder's %d", want.Token, held.Token)
	}
	for _, tn := range c.nodes {
		n := tn.get()
		got, ok := request(n, "waiting")
		if !ok || got.Status != lockstate.Granted || got.Ended != want.Ended || got.Token != want.Token {
			t.Errorf("%s: waiter %+v, leader has %+v", tn.id, got, want)
		}
		if hasSession(n, dying) {
			t.Errorf("%s: expired session %d still open", tn.id, dying)
		}
	}
}

// Keepalives sent to a follower are forwarded to the leader and keep a
// session alive for several TTLs; once they stop, it expires. The TTL is
// 3 s, not lockstate.MinTTL: under -race on a loaded machine a goroutine
// may starve for most of a second, and a 1 s session then lapsed between
// two keepalives (the jepsen workload's tests chose 3 s for the same
// reason).
func TestKeepAliveForwarded(t *testing.T) {
	const sessionTTL = 3 * time.Second
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	f := c.followers(l)[0].get()
	id := createSession(t, f, sessionTTL)

	tick := time.NewTicker(sessionTTL / 5)
	defer tick.Stop()
	for end := time.Now().Add(2 * sessionTTL); time.Now().Before(end); {
		<-tick.C
		ttl, err := f.KeepAlive(context.Background(), id)
		if err != nil {
			t.Fatalf("keepalive: %v", err)
		}
		if ttl != sessionTTL {
			t.Fatalf("keepalive ttl %v, want %v", ttl, sessionTTL)
		}
	}
	if !hasSession(l.get(), id) {
		t.Fatal("session expired although kept alive")
	}
	last := time.Now()
	waitFor(t, 10*time.Second, "the session to expire", func() bool { return !hasSession(l.get(), id) })
	if elapsed := time.Since(last); elapsed < sessionTTL {
		t.Errorf("expired %v after the last keepalive, before its TTL", elapsed)
	}
	if _, err := f.KeepAlive(context.Background(), id); !errors.Is(err, ErrSessionNotFound) {
		t.Errorf("keepalive of an expired session: %v, want ErrSessionNotFound", err)
	}
	if _, err := f.KeepAlive(context.Background(), 999999); !errors.Is(err, ErrSessionNotFound) {
		t.Errorf("keepalive of an unknown session: %v, want ErrSessionNotFound", err)
	}
}

// Killing the leader: the new leader re-arms sessions with a full TTL, so
// sessions kept alive through the survivors live on; the waiter gets the
// lock once the holder releases it, with a larger token. The old leader
// restarts from its data dir and converges.
func TestLeaderFailoverKeepsSessions(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	old := c.leader()
	f := c.followers(old)[0].get()
	const ttl = 2 * time.Second
	holder := createSession(t, f, ttl)
	waiter := createSession(t, f, ttl)

	// Keep both sessions alive through whichever nodes run, from before
	// the acquires: proposals slowed by load could otherwise outlast the
	// TTL.
	ctx, stopKeepalives := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	kaErr := make(chan error, 1)
	wg.Go(func() {
		tick := time.NewTicker(ttl / 8)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			live := c.live()
			n := live[i%len(live)].get()
			if n == nil {
				continue
			}
			for _, id := range []lockstate.SessionID{holder, waiter} {
				_, err := n.KeepAlive(ctx, id)
				if err != nil && !errors.Is(err, ErrNoLeader) && ctx.Err() == nil {
					select {
					case kaErr <- err:
					default:
					}
				}
			}
		}
	})
	defer func() {
		stopKeepalives()
		wg.Wait()
	}()
	held := acquire(t, f, holder, "db/orders", "held", 0, 0)
	if held.Status != lockstate.Granted {
		t.Fatalf("holder: %s", held.Status)
	}
	acquire(t, f, waiter, "db/orders", "waiting", time.Hour, 0)

	old.stop()
	l := c.leader()
	if l == old {
		t.Fatal("stopped node still leads")
	}
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if !hasSession(l.get(), holder) || !hasSession(l.get(), waiter) {
			t.Fatal("a kept-alive session expired across the failover")
		}
		select {
		case err := <-kaErr:
			t.Fatalf("keepalive: %v", err)
		default:
		}
	}

	propose(t, l.get(), &lockstate.Release{Session: holder, Name: "db/orders"})
	c.converged()
	for _, tn := range c.live() {
		got, _ := request(tn.get(), "waiting")
		if got.Status != lockstate.Granted || got.Token <= held.Token {
			t.Errorf("%s: waiter %s with token %d, holder had %d", tn.id, got.Status, got.Token, held.Token)
		}
	}

	old.start()
	c.converged()
}

// A node restarted from its data dir after missing writes converges to
// the same digest.
func TestRestartConverges(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	f := c.followers(l)[0]
	s := createSession(t, l.get(), time.Hour)
	before := c.converged()
	f.stop()
	for i := range 20 {
		id := fmt.Sprintf("restart-%d", i)
		acquire(t, l.get(), s, "restart/"+id, id, 0, 0)
	}
	f.start()
	after := c.converged()
	if after <= before {
		t.Fatalf("applied index %d after the restart, %d before", after, before)
	}
}

// A follower that missed more entries than the leader keeps in its log
// catches up by installing a snapshot, and then goes on appending after it
// (raft-wal takes no gap: raft must drop the follower's old log, which it
// does for a raft.MonotonicLogStore). A read below the leader's first
// index is raft.ErrLogNotFound itself, which raft compares with ==
// before it sends a snapshot.
func TestSnapshotCatchUp(t *testing.T) {
	for _, store := range []string{LogWAL, LogBolt} {
		t.Run(store, func(t *testing.T) {
			c := newTestCluster(t, 3, func(cfg *Config) {
				cfg.SnapshotThreshold = 16
				cfg.TrailingLogs = 8
				cfg.SnapshotInterval = 20 * time.Millisecond
				cfg.LogStore = store
			})
			l := c.leader()
			f := c.followers(l)[0]
			s := createSession(t, l.get(), time.Hour)
			c.converged()
			lastSeen := f.get().raft.LastIndex()
			f.stop()

			for i := range 200 {
				id := fmt.Sprintf("snap-%d", i)
				acquire(t, l.get(), s, "snap/"+id, id, 0, 0)
			}
			waitFor(t, 10*time.Second, "the leader to compact its log past the stopped follower", func() bool {
				first, err := l.get().logs.FirstIndex()
				return err == nil && first > lastSeen+1
			})
			var e raft.Log
			// Under the cache, which may still hold the entry.
			if err := l.get().uncached.GetLog(lastSeen, &e); err != raft.ErrLogNotFound { //nolint:errorlint // raft compares with ==
				t.Fatalf("GetLog(%d) below the first index: %v, want raft.ErrLogNotFound", lastSeen, err)
			}
			f.start()
			c.converged()
			snaps, err := f.get().snaps.List()
			if err != nil || len(snaps) == 0 {
				t.Fatalf("follower has no snapshot after catching up: %v", err)
			}
			for i := range 20 {
				id := fmt.Sprintf("after-%d", i)
				acquire(t, l.get(), s, "after/"+id, id, 0, 0)
			}
			c.converged() // the follower appends after the snapshot
			if !hasSession(f.get(), s) {
				t.Fatal("the follower lost the session")
			}
		})
	}
}

// A hold_ttl ends through a Tick the leader proposes when the table's
// deadline passes, with no other traffic.
func TestHoldTTLExpiresByTick(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	f := c.followers(l)[0].get()
	s := createSession(t, f, time.Hour)
	sub := f.FSM().Subscribe(0)
	defer sub.Close()
	start := time.Now()
	const holdTTL = 300 * time.Millisecond
	acquire(t, f, s, "ttl/lock", "ttl", 0, holdTTL)

	var expiredAt uint64
	timeout := time.After(10 * time.Second)
	for expiredAt == 0 {
		select {
		case b, ok := <-sub.C():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			for _, ev := range b.Events {
				if ev.Kind == lockstate.EvExpired && ev.Name == "ttl/lock" {
					expiredAt = b.Index
				}
			}
		case <-timeout:
			t.Fatal("hold_ttl did not expire")
		}
	}
	if elapsed := time.Since(start); elapsed < holdTTL {
		t.Errorf("hold released after %v, before its hold_ttl %v", elapsed, holdTTL)
	}
	var entry raft.Log
	if err := l.get().logs.GetLog(expiredAt, &entry); err != nil {
		t.Fatalf("entry %d: %v", expiredAt, err)
	}
	if _, cmd, err := fsm.Decode(entry.Data); err != nil {
		t.Fatalf("decode entry %d: %v", expiredAt, err)
	} else if _, ok := cmd.(*lockstate.Tick); !ok {
		t.Errorf("hold expired at entry %d, a %T, want a Tick", expiredAt, cmd)
	}
	c.converged()
	for _, tn := range c.nodes {
		var held bool
		tn.get().FSM().Read(func(t *lockstate.Table) { _, held = t.Lock("ttl/lock") })
		if held {
			t.Errorf("%s: ttl/lock still held", tn.id)
		}
	}
}

// A node that is not the leader answers forwarded calls with not_leader
// instead of forwarding them again.
func TestForwardedCallToFollowerIsRefused(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	body, err := fsm.Encode(0, &lockstate.CreateSession{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{pathPropose, pathReadIndex, pathKeepAlive} {
		b := body
		if path == pathKeepAlive {
			b, _ = msgpack.Marshal(keepAliveRequest{Session: 1})
		}
		// An election under load may make the follower the leader while
		// it is asked, which then answers: the call is made again on a
		// follower then. In a steady term it must be refused.
		for attempt := 0; ; attempt++ {
			f := c.follower(c.leader())
			term := f.get().Status().Term
			resp, err := f.get().client.Post("http://"+f.raftAddr+path, contentType, bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			var rep wireReply
			err = msgpack.NewDecoder(resp.Body).Decode(&rep)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusServiceUnavailable && rep.Code == codeNotLeader {
				break
			}
			if f.get().Status().Term == term || attempt == 5 {
				t.Errorf("%s on a follower: %d %+v (%v), want 503 %s", path, resp.StatusCode, rep, err, codeNotLeader)
				break
			}
		}
	}
}

// The membership calls are the leader's own (no forwarding, no retry):
// onLeader makes each on the node that leads now, so that an election
// under load does not fail the test.
func TestMembershipChanges(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	f := c.followers(c.leader())[0]
	if err := c.onLeader(func(l *Node) error { return l.AddVoter(f.id, f.raftAddr) }); err != nil {
		t.Fatalf("re-adding an existing voter: %v", err)
	}
	if err := c.onLeader(func(l *Node) error { return l.RemoveServer("nobody") }); err != nil {
		t.Fatalf("removing an unknown server: %v", err)
	}
	if err := c.follower(c.leader()).get().AddVoter("x", "127.0.0.1:1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddVoter on a follower: %v, want ErrNotLeader", err)
	}
	if err := c.onLeader(func(l *Node) error { return l.RemoveServer(f.id) }); err != nil {
		t.Fatalf("remove: %v", err)
	}
	servers, err := c.leader().get().Servers()
	if err != nil || len(servers) != 2 {
		t.Fatalf("servers after removal: %v %v", servers, err)
	}
	if err := c.onLeader(func(l *Node) error { return l.AddVoter(f.id, f.raftAddr) }); err != nil {
		t.Fatalf("add back: %v", err)
	}
	servers, _ = c.leader().get().Servers()
	if len(servers) != 3 {
		t.Fatalf("servers after adding back: %v", servers)
	}
	for _, s := range servers {
		if !s.Voter {
			t.Errorf("%s is not a voter", s.ID)
		}
	}
	if !f.get().HasState() {
		t.Error("a member has no raft state")
	}
	if err := f.get().Bootstrap([]Server{{ID: f.id, Addr: f.raftAddr, Voter: true}}); !errors.Is(err, raft.ErrCantBootstrap) {
		t.Errorf("bootstrapping a node with state: %v, want ErrCantBootstrap", err)
	}
}

func TestShutdown(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	old := c.leader()
	n := old.get()
	old.stop()
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	if st := n.Status().State; st != "shutdown" {
		t.Errorf("state after shutdown %q", st)
	}
	if _, _, err := n.Propose(context.Background(), &lockstate.Tick{}); !errors.Is(err, ErrNoLeader) {
		t.Errorf("propose on a stopped node: %v, want ErrNoLeader", err)
	}
	// Leadership was handed over: the others have a leader (without an
	// election timeout, but that is not asserted).
	l := c.leader()
	createSession(t, c.followers(l)[0].get(), time.Minute)
}

// With a majority down, writes give up with ErrNoLeader within a bounded
// time instead of hanging.
func TestNoQuorum(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	for _, f := range c.followers(l) {
		f.stop()
	}
	start := time.Now()
	_, _, err := l.get().Propose(context.Background(), &lockstate.CreateSession{TTL: time.Minute})
	if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("propose without quorum: %v", err)
	}
	if err := l.get().ReadIndex(context.Background()); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("read index without quorum: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("gave up after %v", elapsed)
	}
}

// The leader refuses, without appending, a forwarded command that apply
// would refuse, and a body too large for the log: nothing a node sends it
// takes space in the log for nothing.
func TestLeaderRefusesInvalidAndOversizedForwardedCommands(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	f := c.followers(l)[0]
	before := l.get().raft.LastIndex()

	bad := &lockstate.Acquire{Session: 1, Locks: []lockstate.LockSpec{{Name: "a//b", Mode: lockstate.Write}}}
	res, index, err := f.get().Propose(context.Background(), bad)
	if err != nil || res == nil || res.Err == nil || res.Err.Code != lockstate.CodeInvalid || index != 0 {
		t.Fatalf("invalid forwarded acquire: %+v, %d, %v; want an invalid_request result at no index", res, index, err)
	}

	huge := bytes.Repeat([]byte{0x01}, maxRequestBody+1)
	resp, err := f.get().client.Post("http://"+l.raftAddr+pathPropose, contentType, bytes.NewReader(huge))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("oversized forwarded proposal answered %d, want 400", resp.StatusCode)
	}
	if got := commandsAfter(t, l.get(), before); got != 0 {
		t.Fatalf("refused proposals appended %d commands after index %d", got, before)
	}
}

// commandsAfter counts the commands in n's log after index: not raft's own
// entries (the no-op and barrier of a leader that an election under load
// may bring meanwhile).
func commandsAfter(t *testing.T, n *Node, index uint64) int {
	t.Helper()
	commands := 0
	for i := index + 1; i <= n.raft.LastIndex(); i++ {
		var e raft.Log
		if err := n.logs.GetLog(i, &e); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if e.Type == raft.LogCommand {
			commands++
		}
	}
	return commands
}

// A follower whose table differs from the leader's at the same applied
// index counts and reports it; the others compare equal.
//
// The diverged node is made a nonvoter first, so that it never leads: a
// follower compares with whoever leads, and one that led with a falsified
// digest would (rightly) make the healthy nodes count mismatches.
func TestFollowerDetectsDivergedDigest(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	badNode := c.followers(l)[0]
	if _, _, err := l.get().Propose(context.Background(), &lockstate.CreateSession{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := c.onLeader(func(n *Node) error {
		return n.raft.DemoteVoter(raft.ServerID(badNode.id), 0, 0).Error()
	}); err != nil {
		t.Fatalf("demote %s: %v", badNode.id, err)
	}
	bad := badNode.get()
	var healthy []*Node
	for _, tn := range c.followers(badNode) {
		healthy = append(healthy, tn.get())
	}
	flip := func(d *[32]byte) { d[0] ^= 0xff } // as if one byte of its state were different
	bad.digests.falsify.Store(&flip)
	compared := func() (n uint64) {
		for _, h := range healthy {
			n += h.DigestChecks().Compared
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for bad.DigestChecks().Mismatches == 0 || compared() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: diverged follower %+v, healthy nodes compared %d times", bad.DigestChecks(), compared())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, h := range healthy {
		if got := h.DigestChecks(); got.Mismatches != 0 || h.Diverged() != "" {
			t.Fatalf("a healthy node reported mismatches: %+v, %q", got, h.Diverged())
		}
	}
	if got := bad.DigestChecks(); got.LastMismatchIndex == 0 {
		t.Fatalf("mismatch without an index: %+v", got)
	}
	// The diverged follower stops for good: a restart reads the marker.
	if bad.Diverged() == "" {
		t.Fatal("the diverged follower does not say so")
	}
	badNode.stop()
	badNode.start()
	if got := badNode.get().Diverged(); !strings.Contains(got, "digest") {
		t.Fatalf("after a restart the diverged node says %q", got)
	}
}

// The leader writes entries in the format its gate allows: bare while a
// voter of an older build is in the cluster, checksummed once all apply it.
func TestLeaderWritesTheGatedLogFormat(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader().get()
	entryType := func(format int) fsm.MessageType {
		t.Helper()
		// Every node's gate: an election under load may hand the write to
		// another leader, to which l forwards it.
		for _, tn := range c.live() {
			tn.get().SetLogFormat(func() int { return format })
		}
		res, index, err := l.Propose(context.Background(), &lockstate.CreateSession{TTL: time.Minute})
		if err != nil || res.Err != nil {
			t.Fatalf("propose: %+v, %v", res, err)
		}
		var entry raft.Log
		waitFor(t, 10*time.Second, fmt.Sprintf("entry %d in %s's log", index, l.cfg.ID), func() bool {
			return l.logs.GetLog(index, &entry) == nil
		})
		return fsm.MessageType(entry.Data[0])
	}
	if got := entryType(1); got != fsm.CreateSessionType {
		t.Errorf("format 1: entry type %v, want a bare create_session", got)
	}
	if got := entryType(2); got != fsm.ChecksummedType {
		t.Errorf("format 2: entry type %v, want the checksummed envelope", got)
	}
	if got := entryType(99); got != fsm.ChecksummedType {
		t.Errorf("format 99 (newer than this build): entry type %v, want this build's newest", got)
	}
}
