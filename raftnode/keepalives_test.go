package raftnode

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// A batched keepalive sent to a follower is forwarded to the leader in
// one call and keeps every live session in it alive past its TTL; a gone
// session gets TTL 0, without failing the others.
func TestKeepAliveManyForwarded(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	f := keptThroughAFollower(t, c)
	if _, err := f.KeepAliveMany(context.Background(), make([]lockstate.SessionID, MaxKeepAliveBatch+1)); err == nil {
		t.Fatalf("a keepalive of %d sessions was taken", MaxKeepAliveBatch+1)
	}
}

// A follower whose leader runs an older build (no batched keepalive: its
// node port answers 404) keeps the sessions alive one call each.
func TestKeepAliveManyToAnOlderLeader(t *testing.T) {
	keptThroughAFollower(t, newTestCluster(t, 3, func(cfg *Config) { cfg.noBatchedKeepAlive = true }))
}

// keptThroughAFollower opens two sessions and keeps them alive, with a
// gone one, by batched keepalives through a follower for two TTLs: each
// answered with its TTL (0 for the gone one), neither expires. It returns
// the follower.
func keptThroughAFollower(t *testing.T, c *testCluster) *Node {
	const sessionTTL = 3 * time.Second // see TestKeepAliveForwarded
	f := c.followers(c.leader())[0].get()
	a, b := createSession(t, f, sessionTTL), createSession(t, f, 2*sessionTTL)
	tick := time.NewTicker(sessionTTL / 5)
	defer tick.Stop()
	for end := time.Now().Add(2 * sessionTTL); time.Now().Before(end); {
		<-tick.C
		ttls, err := f.KeepAliveMany(context.Background(), []lockstate.SessionID{a, 999999, b})
		if err != nil {
			t.Fatalf("keepalive: %v", err)
		}
		if want := []time.Duration{sessionTTL, 0, 2 * sessionTTL}; !slices.Equal(ttls, want) {
			t.Fatalf("keepalive ttls %v, want %v", ttls, want)
		}
	}
	leader := c.leader().get()
	if !hasSession(leader, a) || !hasSession(leader, b) {
		t.Fatal("a session expired although kept alive")
	}
	return f
}

// A node holds at most Config.MaxLeaderWaits calls waiting for a leader;
// one more is refused at once with ErrBusy (an ErrNoLeader: nothing was
// done), and a place frees as soon as a waiting call ends.
func TestLeaderWaitsAreBounded(t *testing.T) {
	n, err := Open(Config{ID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Timing: testTiming,
		Logger: testLogger(t, "n1"), MaxLeaderWaits: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	// Not bootstrapped: no leader will come, so calls wait until ctx ends.
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 2)
	for range 2 {
		go func() { ended <- n.ReadIndex(ctx) }()
	}
	waitFor(t, 10*time.Second, "two calls waiting", func() bool { return n.waits.n.Load() == 2 })
	err = n.ReadIndex(context.Background())
	if !errors.Is(err, ErrBusy) || !errors.Is(err, ErrNoLeader) {
		t.Fatalf("a third call: %v, want ErrBusy", err)
	}
	cancel()
	for range 2 {
		if err := <-ended; errors.Is(err, ErrBusy) || !errors.Is(err, ErrNoLeader) {
			t.Fatalf("a waiting call ended with %v, want ErrNoLeader (not busy)", err)
		}
	}
	if got := n.waits.n.Load(); got != 0 {
		t.Fatalf("%d calls still counted as waiting", got)
	}
	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	if err := n.ReadIndex(short); errors.Is(err, ErrBusy) {
		t.Fatalf("a call after the others ended: %v", err)
	}
}
