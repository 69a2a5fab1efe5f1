package raftnode

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// The leader's remove rule refuses an operator's removal of a member it
// calls live, asked through any node (ErrMemberAlive crosses the
// internal RPC). A member that leaves removes itself past the rule
// (RemoveSelf), and only itself: a member asking to remove another one
// as leaving is refused.
func TestRemoveRule(t *testing.T) {
	pki := newTestPKI(t)
	c := newTestCluster(t, 3, pki.useTLS)
	for _, tn := range c.nodes {
		tn.get().SetRemoveRule(func(string) bool { return true }) // every member is live
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, via := range c.nodes {
		if id, err := c.removeFollower(ctx, via); !errors.Is(err, ErrMemberAlive) {
			t.Fatalf("removing live %s through %s: %v, want %v", id, via.id, err, ErrMemberAlive)
		}
	}
	// Refused for good by whichever node is asked, before it looks who
	// leads (a follower would otherwise say "not the leader, retry").
	a, b, to := c.nodes[0], c.nodes[1], c.nodes[2]
	if err := a.get().forwardRemove(ctx, to.raftAddr, b.id, true); err == nil || errors.Is(err, errRetry) {
		t.Fatalf("%s removing %s as leaving: %v, want a refusal", a.id, b.id, err)
	}
	if ids := serverIDs(t, c.leader().get()); len(ids) != 3 {
		t.Fatalf("servers after refused removals: %v", ids)
	}

	var gone string
	waitFor(t, 20*time.Second, "a follower to remove itself", func() bool {
		f := c.followers(c.leader())[0]
		err := f.get().RemoveSelf(ctx)
		if errors.Is(err, ErrRemoveLeader) {
			return false // it leads after an election: ask another follower
		}
		if err != nil {
			t.Fatalf("%s removing itself: %v", f.id, err)
		}
		gone = f.id
		return true
	})
	waitFor(t, 10*time.Second, "the configuration without "+gone, func() bool {
		l := c.readyLeader()
		return l != nil && !slices.Contains(serverIDs(t, l.get()), gone)
	})
}

// removeFollower asks via, as an operator, to remove a node that does
// not lead and returns its id and the answer. Should that node lead by
// the time the leader answers (ErrRemoveLeader), another one is asked
// about.
func (c *testCluster) removeFollower(ctx context.Context, via *testNode) (string, error) {
	for {
		f := c.followers(c.leader())[0]
		err := via.get().RemoveMember(ctx, f.id)
		if !errors.Is(err, ErrRemoveLeader) || ctx.Err() != nil {
			return f.id, err
		}
	}
}

// serverIDs returns the ids of n's raft configuration.
func serverIDs(t *testing.T, n *Node) []string {
	t.Helper()
	servers, err := n.Servers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range servers {
		ids = append(ids, s.ID)
	}
	return ids
}
