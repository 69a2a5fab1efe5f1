package raftnode

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Servers returns the raft configuration.
func (n *Node) Servers() ([]Server, error) {
	future := n.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return nil, fmt.Errorf("raftnode: configuration: %w", err)
	}
	cfg := future.Configuration()
	out := make([]Server, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		out = append(out, Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// Bootstrap starts a new cluster with the given voters (this node among them).
// A node with raft state refuses: the error wraps raft.ErrCantBootstrap.
func (n *Node) Bootstrap(servers []Server) error {
	var cfg raft.Configuration
	self := false
	for _, s := range servers {
		suffrage := raft.Voter
		if !s.Voter {
			suffrage = raft.Nonvoter
		}
		cfg.Servers = append(cfg.Servers, raft.Server{Suffrage: suffrage, ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.Addr)})
		self = self || s.ID == n.cfg.ID
	}
	if !self {
		return fmt.Errorf("raftnode: bootstrap: this node (%s) is not among the servers", n.cfg.ID)
	}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil {
		return fmt.Errorf("raftnode: bootstrap: %w", err)
	}
	n.logger.Info("bootstrapped raft cluster", "servers", len(servers))
	return nil
}

// AddVoter adds (or re-adds with a new address) a voter; leader only.
// Adding a voter that is already there with the same address does nothing
// (hraftd's idempotent join); a server known under the same id or address
// with the other one different is removed first.
func (n *Node) AddVoter(id, addr string) error {
	if n.raft.State() != raft.Leader {
		return fmt.Errorf("raftnode: add voter %s: %w", id, ErrNotLeader)
	}
	future := n.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return fmt.Errorf("raftnode: add voter %s: configuration: %w", id, err)
	}
	for _, s := range future.Configuration().Servers {
		sameID, sameAddr := string(s.ID) == id, string(s.Address) == addr
		switch {
		case sameID && sameAddr && s.Suffrage == raft.Voter:
			return nil
		case sameID && sameAddr:
			// A non-voter: AddVoter below promotes it.
		case sameID || sameAddr:
			if err := n.raft.RemoveServer(s.ID, 0, n.timing.leaderWait).Error(); err != nil {
				return fmt.Errorf("raftnode: add voter %s: remove stale %s at %s: %w", id, s.ID, s.Address, err)
			}
			n.logger.Info("removed stale server before re-adding", "id", s.ID, "addr", s.Address)
		}
	}
	if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, n.timing.leaderWait).Error(); err != nil {
		return fmt.Errorf("raftnode: add voter %s at %s: %w", id, addr, err)
	}
	n.logger.Info("added voter", "id", id, "addr", addr)
	return nil
}

// RemoveServer removes a server from the configuration; leader only.
// Removing a server that is not there does nothing.
func (n *Node) RemoveServer(id string) error {
	if n.raft.State() != raft.Leader {
		return fmt.Errorf("raftnode: remove server %s: %w", id, ErrNotLeader)
	}
	servers, err := n.Servers()
	if err != nil {
		return fmt.Errorf("raftnode: remove server %s: %w", id, err)
	}
	found := false
	for _, s := range servers {
		found = found || s.ID == id
	}
	if !found {
		return nil
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.timing.leaderWait).Error(); err != nil {
		return fmt.Errorf("raftnode: remove server %s: %w", id, err)
	}
	n.logger.Info("removed server", "id", id)
	return nil
}

// SetRemoveRule sets which members the leader refuses to remove on an
// operator's request (RemoveMember): live reports whether the cluster's
// membership would add server id back at once, so that removing it would
// not last (with gossip: a member seen alive). nil (the default) refuses
// none.
func (n *Node) SetRemoveRule(live func(id string) bool) {
	if live == nil {
		n.removeRule.Store(nil)
		return
	}
	n.removeRule.Store(&live)
}

// RemoveMember removes server id from the configuration through the
// leader (forwarded from a follower), for a node that is gone for good.
// The leader refuses to remove itself (ErrRemoveLeader): it must leave,
// which hands leadership over first. It refuses a member its remove rule
// calls live (ErrMemberAlive): that member would be added back.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	return n.leaderCall(ctx,
		func(context.Context) error { return n.removeMemberLocal(id, false) },
		func(ctx context.Context, addr string) error { return n.forwardRemove(ctx, addr, id, false) })
}

// RemoveSelf takes this node out of the configuration through the
// leader, as it leaves for good. Unlike RemoveMember the leader does not
// ask its remove rule: a leaving node is alive until it has left, and
// is not added back once it has. A leader must remove itself instead
// (RemoveServer), and gets ErrRemoveLeader here.
func (n *Node) RemoveSelf(ctx context.Context) error {
	id := n.cfg.ID
	return n.leaderCall(ctx,
		func(context.Context) error { return n.removeMemberLocal(id, true) },
		func(ctx context.Context, addr string) error { return n.forwardRemove(ctx, addr, id, true) })
}

// removeMemberLocal removes id on this node, the leader; leaving: id
// asked for it as it leaves (RemoveSelf), so the remove rule is skipped.
func (n *Node) removeMemberLocal(id string, leaving bool) error {
	if n.raft.State() != raft.Leader {
		return fmt.Errorf("%w: remove %s", errRetry, id)
	}
	if id == n.cfg.ID {
		return ErrRemoveLeader
	}
	if live := n.removeRule.Load(); !leaving && live != nil && (*live)(id) {
		return ErrMemberAlive
	}
	err := n.RemoveServer(id)
	if errors.Is(err, ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		// Leadership moved meanwhile: ask the new leader. Removing is
		// idempotent, so a removal that did commit is not repeated.
		return fmt.Errorf("%w: %w", errRetry, err)
	}
	return err
}
