package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
)

// Membership faults change the raft configuration under load with the
// operators' own tools, and give the cluster its N voters back when
// undone:
//
//   - member-leave: a node (the leader half the time) leaves for good
//     (POST /v1/agent/leave): it takes itself out of the configuration
//     and exits.
//   - member-remove: a node (the leader half the time) is killed and an
//     operator removes it from the configuration (DELETE
//     /v1/members/{id} on another node), once gossip has declared it
//     dead (lockd answers 409 member_alive until then: the leader would
//     add a live member back) and, for the leader, once the others have
//     elected a new one (lockd refuses to remove a live leader, which
//     must leave instead).
//   - member-shrink (5 nodes): two nodes leave, one after the other:
//     5 voters → 3.
//   - member-grow (3 nodes): n4 and n5, the compose file's spare nodes,
//     start fresh and join: 3 voters → 5. Undoing makes them leave and
//     deletes them: 5 → 3.
//   - member-replace: a node (the leader half the time) is killed and
//     nobody removes it; it comes back as a fresh node under a new id
//     at the same address, and the leader must drop the old id when it
//     adds the new one.
//
// Undoing brings each node back, at random with its old data dir (a
// removed node that returns), as a fresh node under the same id with an
// empty data dir (compose.Cluster.Replace), or as a fresh node under a
// new id (compose.Cluster.ReplaceAs); it joins through gossip and the
// leader adds it as a voter. The undo waits until the cluster is healthy
// with N voters again, none of them an id a node was replaced from.

// Membership fault names.
const (
	FaultMemberLeave   = "member-leave"
	FaultMemberRemove  = "member-remove"
	FaultMemberShrink  = "member-shrink"
	FaultMemberReplace = "member-replace"
	FaultMemberGrow    = "member-grow"
)

// KindMembership draws membership faults.
const KindMembership = "membership"

// memberFaults are the membership faults for a cluster of n nodes.
func memberFaults(n int) []string {
	if n >= 5 {
		return []string{FaultMemberLeave, FaultMemberRemove, FaultMemberReplace, FaultMemberShrink}
	}
	return []string{FaultMemberLeave, FaultMemberRemove, FaultMemberReplace, FaultMemberGrow}
}

// leaveTimeout bounds how long a leaving node takes to exit.
const leaveTimeout = 30 * time.Second

// memberLeave makes nodes leave one after the other.
func memberLeave(ctx context.Context, c *compose.Cluster, cfg Config, name string, nodes []string, r *rand.Rand) (*fault, error) {
	ft := &fault{name: name}
	var back []func(context.Context) error
	for _, n := range nodes {
		ft.targets = append(ft.targets, n)
		back = append(back, returner(c, cfg, n, r, ft))
		if err := c.Leave(ctx, n); err != nil {
			ft.undo = undoAll(c, cfg.LoneReplacements, back)
			return ft, err
		}
		wctx, cancel := context.WithTimeout(ctx, leaveTimeout)
		err := c.WaitExited(wctx, n)
		cancel()
		if err != nil {
			ft.undo = undoAll(c, cfg.LoneReplacements, back)
			return ft, err
		}
	}
	ft.undo = undoAll(c, cfg.LoneReplacements, back)
	return ft, nil
}

// memberRemove kills node and removes it through another node.
func memberRemove(ctx context.Context, c *compose.Cluster, cfg Config, node string, r *rand.Rand) (*fault, error) {
	ft := &fault{name: FaultMemberRemove, targets: []string{node}}
	ft.undo = undoAll(c, cfg.LoneReplacements, []func(context.Context) error{returner(c, cfg, node, r, ft)})
	if err := Kill(ctx, c, node); err != nil {
		return ft, err
	}
	return ft, RemoveThroughOthers(ctx, c, node)
}

// removeTimeout bounds an operator's removal of a dead node: it includes
// gossip declaring the node dead (6–8 s after a kill with lockd's
// memberlist LAN settings, measured on 3 and 5 nodes) and, for a dead
// leader, the others' election, which runs meanwhile.
const removeTimeout = 30 * time.Second

// RemoveThroughOthers removes node's id, as an operator removes a node
// that died, through each other node in turn, round after round, until
// one accepts (an election may be under way, or gossip may still see the
// node alive: 409 member_alive) or removeTimeout passes.
func RemoveThroughOthers(ctx context.Context, c *compose.Cluster, node string) error {
	ctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	var last error // the latest refusal, for the error at the end
	for {
		for _, via := range without(c.Names(), node) {
			if last = c.RemoveMember(ctx, via, c.ID(node)); last == nil {
				return nil
			}
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return fmt.Errorf("remove %s: %w", node, errors.Join(last, ctx.Err()))
		}
	}
}

// spareNodes are the compose file's nodes a 3-node cluster grows by.
var spareNodes = []string{"n4", "n5"}

// memberGrow starts the spare nodes fresh and waits (bounded) until the
// leader counts them as voters; undoing shrinks the cluster back.
func memberGrow(ctx context.Context, c *compose.Cluster) (*fault, error) {
	ft := &fault{name: FaultMemberGrow, targets: slices.Clone(spareNodes),
		undo: func(ctx context.Context) error { return shrinkBack(ctx, c) }}
	for _, n := range spareNodes {
		if err := c.Replace(ctx, n); err != nil {
			return ft, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
	defer cancel()
	return ft, waitVoters(wctx, c, len(c.Names())+len(spareNodes))
}

// shrinkBack retires the spare nodes and waits until the cluster is
// healthy with its own nodes only.
func shrinkBack(ctx context.Context, c *compose.Cluster) error {
	var errs []error
	for _, n := range spareNodes {
		errs = append(errs, retireSpare(ctx, c, n))
	}
	wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
	defer cancel()
	return errors.Join(append(errs, c.WaitHealthy(wctx))...)
}

// retireSpare makes spare node n leave and deletes it. Where it cannot
// leave (not running, stuck) it is deleted first and then removed
// through the others: a live node removed would be added again by the
// leader. The delete and the removal have bounds of their own, so a slow
// leave does not leave the node running.
func retireSpare(ctx context.Context, c *compose.Cluster, n string) error {
	lctx, cancel := context.WithTimeout(ctx, leaveTimeout)
	err := c.Leave(lctx, n)
	if err == nil {
		err = c.WaitExited(lctx, n)
	}
	cancel()
	own := context.WithoutCancel(ctx)
	dctx, cancel := context.WithTimeout(own, removeTimeout)
	defer cancel()
	gone := c.Remove(dctx, n)
	if err == nil {
		return gone
	}
	return errors.Join(gone, RemoveThroughOthers(own, c, n))
}

// retireSpares retires any spare node left running in a 3-node cluster
// (Recover's safety net for a grow whose undo did not finish).
func retireSpares(ctx context.Context, c *compose.Cluster) error {
	if len(c.Names()) != 3 {
		return nil
	}
	var errs []error
	for _, n := range spareNodes {
		if _, err := c.Container(ctx, n); err == nil {
			errs = append(errs, retireSpare(ctx, c, n))
		}
	}
	return errors.Join(errs...)
}

// waitVoters polls until a node that knows a leader lists want voters
// in the configuration, or ctx ends (the leader may be a spare node,
// which Statuses does not ask).
func waitVoters(ctx context.Context, c *compose.Cluster, want int) error {
	for {
		for _, st := range c.Statuses(ctx) {
			if st != nil && st.Leader.ID != "" && compose.Voters(st) == want {
				return nil
			}
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return fmt.Errorf("waiting for %d voters: %w", want, ctx.Err())
		}
	}
}

// memberReplace kills node; undoing brings a fresh node under a new id
// in its place, with the old id still in the configuration.
func memberReplace(ctx context.Context, c *compose.Cluster, cfg Config, node string) (*fault, error) {
	ft := &fault{name: FaultMemberReplace, targets: []string{node}}
	ft.undo = undoAll(c, cfg.LoneReplacements, []func(context.Context) error{renewer(c, cfg, node, ft)})
	return ft, Kill(ctx, c, node)
}

// renewer notes in ft's targets the new id node comes back under and
// returns the step that brings it back fresh under it.
func renewer(c *compose.Cluster, cfg Config, node string, ft *fault) func(context.Context) error {
	id := nextID(c.ID(node))
	ft.targets = append(ft.targets, node+" back fresh as "+id)
	return func(ctx context.Context) error { return c.ReplaceAs(ctx, node, id, cfg.replacementEnv()...) }
}

// nextID is the id a node running as id is replaced under: n1 → n1-r1,
// n1-r1 → n1-r2.
func nextID(id string) string {
	base, gen := id, 0
	if i := strings.LastIndex(id, "-r"); i > 0 {
		if g, err := strconv.Atoi(id[i+2:]); err == nil {
			base, gen = id[:i], g
		}
	}
	return base + "-r" + strconv.Itoa(gen+1)
}

// returner decides now how node comes back (old data, fresh, or fresh
// under a new id; noted in ft's targets) and returns the step that
// brings it back.
func returner(c *compose.Cluster, cfg Config, node string, r *rand.Rand, ft *fault) func(context.Context) error {
	way := r.Intn(3)
	if cfg.LoneReplacements {
		way = 0
	}
	switch way {
	case 0:
		ft.targets = append(ft.targets, node+" back fresh")
		return func(ctx context.Context) error { return c.Replace(ctx, node, cfg.replacementEnv()...) }
	case 1:
		return renewer(c, cfg, node, ft)
	}
	ft.targets = append(ft.targets, node+" back with its data")
	return func(ctx context.Context) error {
		id, err := c.Container(ctx, node)
		if err == nil {
			_, err = compose.Docker(ctx, "start", id)
		}
		return err
	}
}

// undoAll brings every node back, then waits until the cluster is
// healthy with all its voters (not for lone replacements, which never
// join).
func undoAll(c *compose.Cluster, lone bool, back []func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, b := range back {
			if err := b(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 || lone {
			return errors.Join(errs...)
		}
		wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
		defer cancel()
		return c.WaitHealthy(wctx)
	}
}

// replacementEnv is the environment of a fresh replacement: under the
// negative control, one that bootstraps a cluster of its own instead of
// joining (lockd --unsafe no-consensus, as an auto-bootstrapping
// misconfiguration would).
func (cfg Config) replacementEnv() []string {
	if cfg.LoneReplacements {
		return []string{"LOCKD_UNSAFE=no-consensus"}
	}
	return nil
}

// applyMembership applies one membership fault.
func applyMembership(ctx context.Context, c *compose.Cluster, cfg Config, r *rand.Rand, name string) (*fault, error) {
	nodes := c.Names()
	leader, _ := c.Leader(ctx)
	if leader == "" {
		return nil, fmt.Errorf("%s: no leader", name)
	}
	n := nodes[r.Intn(len(nodes))] // leave, remove, replace: the leader half the time
	if r.Intn(2) == 0 {
		n = leader
	}
	noteLeader := func(ft *fault, err error) (*fault, error) {
		if ft != nil && n == leader {
			ft.targets = append(ft.targets, n+" was the leader")
		}
		return ft, err
	}
	switch name {
	case FaultMemberLeave:
		return noteLeader(memberLeave(ctx, c, cfg, name, []string{n}, r))
	case FaultMemberRemove:
		return noteLeader(memberRemove(ctx, c, cfg, n, r))
	case FaultMemberReplace:
		return noteLeader(memberReplace(ctx, c, cfg, n))
	case FaultMemberShrink:
		return memberLeave(ctx, c, cfg, name, shuffled(nodes, r)[:2], r)
	case FaultMemberGrow:
		if cfg.LoneReplacements { // its control is about replacements; grown nodes are none
			return nil, errNothingToDo
		}
		return memberGrow(ctx, c)
	}
	return nil, fmt.Errorf("unknown fault %q", name)
}

// isMembership reports whether fault name is a membership fault.
func isMembership(name string) bool { return strings.HasPrefix(name, "member-") }
