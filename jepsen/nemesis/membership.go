package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
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
//   - member-remove: a node is killed and an operator removes it from
//     the configuration (DELETE /v1/members/{id} on another node).
//   - member-shrink (5 nodes): two nodes leave, one after the other:
//     5 voters → 3.
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
)

// KindMembership draws membership faults.
const KindMembership = "membership"

// memberFaults are the membership faults for a cluster of n nodes.
func memberFaults(n int) []string {
	if n >= 5 {
		return []string{FaultMemberLeave, FaultMemberRemove, FaultMemberReplace, FaultMemberShrink}
	}
	return []string{FaultMemberLeave, FaultMemberRemove, FaultMemberReplace}
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
	var errs []error
	for _, via := range without(c.Names(), node) {
		err := c.RemoveMember(ctx, via, c.ID(node))
		if err == nil {
			return ft, nil
		}
		errs = append(errs, err)
	}
	return ft, errors.Join(errs...)
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
	switch name {
	case FaultMemberLeave:
		n := nodes[r.Intn(len(nodes))]
		if r.Intn(2) == 0 {
			n = leader
		}
		return memberLeave(ctx, c, cfg, name, []string{n}, r)
	case FaultMemberRemove:
		others := without(nodes, leader)
		return memberRemove(ctx, c, cfg, others[r.Intn(len(others))], r)
	case FaultMemberReplace:
		n := nodes[r.Intn(len(nodes))]
		if r.Intn(2) == 0 {
			n = leader
		}
		return memberReplace(ctx, c, cfg, n)
	case FaultMemberShrink:
		return memberLeave(ctx, c, cfg, name, shuffled(nodes, r)[:2], r)
	}
	return nil, fmt.Errorf("unknown fault %q", name)
}

// isMembership reports whether fault name is a membership fault.
func isMembership(name string) bool { return strings.HasPrefix(name, "member-") }
