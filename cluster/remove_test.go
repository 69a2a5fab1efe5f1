package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lockd/lockd/raftnode"
)

// An operator's removal of a member that gossip sees alive is refused
// (the leader would add it back within a round): through any node, the
// member itself included, and it stays a voter. Once the member is down
// and gossip has declared it dead, the removal is accepted and lasts
// while it stays down; when it comes back, reconciliation adds it again
// (by design, as after Consul's force-leave).
func TestRemoveRefusesALiveMember(t *testing.T) {
	nodes := formCluster(t)
	victim := refuseRemoval(t, nodes)
	ln, _ := leader(t, nodes...).get()
	if !slices.Contains(voters(ln), victim.id) {
		t.Fatalf("voters after the refused removal: %v, want %s among them", voters(ln), victim.id)
	}

	victim.kill()
	rest := slices.DeleteFunc(slices.Clone(nodes), func(tn *testNode) bool { return tn == victim })
	waitFor(t, 30*time.Second, "every other node to see "+victim.id+" dead", func() bool {
		for _, tn := range rest {
			if _, c := tn.get(); status(c, victim.id) != StatusDead {
				return false
			}
		}
		return true
	})
	n, _ := rest[0].get()
	if err := removeMember(n, victim.id); err != nil {
		t.Fatalf("removing %s, dead: %v", victim.id, err)
	}
	want := []string{rest[0].id, rest[1].id}
	waitVoters(t, leader(t, rest...), want...)
	// Gone for good while down: reconciliation rounds after the removal
	// leave it out.
	before := reconciles(rest)
	waitFor(t, 10*time.Second, "reconciliation rounds", func() bool { return reconciles(rest) >= before+3 })
	if ln, _ := leader(t, rest...).get(); !slices.Equal(voters(ln), want) {
		t.Fatalf("voters after reconciling without %s: %v, want %v", victim.id, voters(ln), want)
	}

	victim.start(rest[0].gossip())
	waitVoters(t, leader(t, nodes...), "n1", "n2", "n3")
}

// refuseRemoval asks, through a node that does not lead and through the
// member itself, to remove a member that does not lead, and wants both
// refused with ErrMemberAlive; it returns that member. The member is
// picked again when an election made it the leader meanwhile (which
// answers ErrRemoveLeader).
func refuseRemoval(t *testing.T, nodes []*testNode) *testNode {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := leader(t, nodes...)
		var others []*testNode
		for _, tn := range nodes {
			if tn != l {
				others = append(others, tn)
			}
		}
		victim, via := others[0], others[1]
		var errs []error
		for _, tn := range []*testNode{via, victim} {
			n, _ := tn.get()
			errs = append(errs, removeMember(n, victim.id))
		}
		switch {
		case errors.Is(errs[0], raftnode.ErrMemberAlive) && errors.Is(errs[1], raftnode.ErrMemberAlive):
			return victim
		case (errors.Is(errs[0], raftnode.ErrRemoveLeader) || errors.Is(errs[1], raftnode.ErrRemoveLeader)) &&
			time.Now().Before(deadline):
			continue // victim leads now: pick again
		}
		t.Fatalf("removing %s, alive: through %s: %v; through itself: %v; want %v",
			victim.id, via.id, errs[0], errs[1], raftnode.ErrMemberAlive)
	}
}

// removeMember is an operator's removal of id through n.
func removeMember(n *raftnode.Node, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.RemoveMember(ctx, id)
}

// reconciles sums the reconciliation rounds the running nodes ran as
// leader.
func reconciles(nodes []*testNode) (sum uint64) {
	for _, tn := range nodes {
		if _, c := tn.get(); c != nil {
			sum += c.reconciles.Load()
		}
	}
	return sum
}
