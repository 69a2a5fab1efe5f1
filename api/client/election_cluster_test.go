//go:build linux

package client_test

import (
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
)

// TestObserveAcrossFailover: an observer follows an election while the
// node it reads from (the leader it talks to, whichever that is) is
// killed. It keeps observing on the new leader: the leader's proclaim
// after the failover, under the same token, and the queued candidate,
// with a larger token, once the leader's session closes — each once, in
// token order.
func TestObserveAcrossFailover(t *testing.T) {
	t.Parallel() // mostly waiting: overlap with the others
	cl := startCluster(t, 3)
	cl.waitLeader(cl.nodes, 20*time.Second)
	newClient := func() *client.Client {
		c, err := client.NewWith(cl.addrs(), client.WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	observer, ca, cb := newClient(), newClient(), newClient()
	ctx := ctxFor(t, 60*time.Second)
	const name = "svc/failover"
	a, b := newSession(t, ca, 5*time.Second), newSession(t, cb, 5*time.Second)
	la, err := a.Election(name).Campaign(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	bch := goCampaign(ctx, b, name, "b1")
	queued(t, ctx, observer, name, 1)
	leaders := observer.Election(name).Observe(ctx)
	wantLeader(t, nextLeader(t, leaders, 10*time.Second, "before the failover"), "a1", la.Token, "observed first")

	inUse := cl.inUse(observer)
	cl.kill(inUse)
	newLeader := cl.waitLeader(cl.others(inUse), 20*time.Second)
	t.Logf("killed %s; new leader %s", inUse.id, newLeader)

	if err := la.Proclaim(ctx, "a2"); err != nil {
		t.Fatalf("proclaim after the failover: %v", err)
	}
	wantLeader(t, nextLeader(t, leaders, 20*time.Second, "the proclaim after the failover"), "a2", la.Token, "observed after the failover")

	if err := a.Close(ctx); err != nil {
		t.Fatalf("closing the leader's session: %v", err)
	}
	r := recvLeadership(t, bch, 20*time.Second, "the candidate")
	if r.err != nil || r.l.Token <= la.Token {
		t.Fatalf("candidate: %+v, %v; want a token above %d", r.l, r.err, la.Token)
	}
	wantLeader(t, nextLeader(t, leaders, 20*time.Second, "the next leader"), "b1", r.l.Token, "observed after the close")
	select {
	case l := <-leaders:
		t.Fatalf("observed %+v after the last change", l)
	case <-time.After(time.Second):
	}
	if b.Err() != nil || r.l.LostErr() != nil {
		t.Fatalf("the new leader's session %v, leadership %v", b.Err(), r.l.LostErr())
	}
}
