package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockd/lockd/raftnode"
)

// maybeBootstrap is Consul's maybeBootstrap over gossip metadata: once
// BootstrapExpect alive servers with the same expect value see each other
// and no alive lockd node has raft state, the one with the lowest id
// bootstraps raft with all of them as voters. The others wait: the
// configuration reaches them with the new leader's first entries.
//
// A node with raft state never bootstraps (a restart rejoins from disk);
// a conflicting expect value stops bootstrap with an error until the
// membership changes; an alive node with raft state means a cluster
// already exists (raft #122), so this node waits to be added instead.
// Only members that pass Config.VerifyPeer count, for every part of the
// decision: what a member claims in gossip (raft state, its expect value,
// a low id) is not believed until its node certificate names it, so a
// holder of the gossip key alone cannot stop or steer a bootstrap.
func (c *Cluster) maybeBootstrap() {
	c.mu.Lock()
	expect := c.expect
	c.mu.Unlock()
	if expect == 0 {
		return
	}
	if c.node.HasState() {
		c.noBootstrap("raft state exists; not bootstrapping")
		return
	}
	peers, existing, conflict := c.bootstrapPeers(expect)
	switch {
	case conflict != "":
		c.note(true, conflict)
		return
	case len(existing) > 0:
		c.noBootstrap(fmt.Sprintf("nodes %s already have raft state; waiting to be added instead of bootstrapping", strings.Join(existing, ",")))
		return
	case len(peers) < expect:
		c.note(false, fmt.Sprintf("waiting for %d servers to bootstrap, have %d", expect, len(peers)))
		return
	case peers[0].ID != c.cfg.ID:
		// Stay ready to bootstrap: if the lowest one goes away before
		// it does, the next lowest takes over.
		c.note(false, fmt.Sprintf("%d servers present; %s bootstraps", len(peers), peers[0].ID))
		return
	}
	servers := make([]raftnode.Server, len(peers))
	ids := make([]string, len(peers))
	for i, p := range peers { // verified by bootstrapPeers
		servers[i] = raftnode.Server{ID: p.ID, Addr: p.Raft, Voter: true}
		ids[i] = p.ID
	}
	if err := c.node.Bootstrap(servers); err != nil {
		c.logger.Error("bootstrap failed", "error", err)
		c.noBootstrap("bootstrap failed; not retrying")
		return
	}
	c.bootstrapped.Store(true)
	c.noBootstrap("")
	c.logger.Info("bootstrapped raft", "voters", strings.Join(ids, ","))
}

// bootstrapPeers returns the alive, verified members that bootstrap with
// this node's expect value, sorted by id, the sorted ids of alive,
// verified members that already have raft state, and a message if one of
// them expects another number of servers.
func (c *Cluster) bootstrapPeers(expect int) (peers []nodeMeta, existing []string, conflict string) {
	for _, m := range c.verifiedAlive() {
		if m.meta.State {
			existing = append(existing, m.meta.ID)
		}
		if m.meta.Expect == 0 {
			continue // joins and waits; not a bootstrap peer
		}
		if m.meta.Expect != expect {
			return nil, nil, fmt.Sprintf("member %s expects %d servers, this node %d: not bootstrapping; all nodes must use the same --bootstrap-expect", m.meta.ID, m.meta.Expect, expect)
		}
		peers = append(peers, m.meta)
	}
	slices.Sort(existing)
	slices.SortFunc(peers, func(a, b nodeMeta) int { return strings.Compare(a.ID, b.ID) })
	return peers, existing, ""
}

// verifiedAlive returns the alive members that pass VerifyPeer (all
// alive members without it). A member is verified once per raft address:
// the bootstrap loop runs on every membership event.
func (c *Cluster) verifiedAlive() []member {
	c.mu.Lock()
	var alive []member
	for _, m := range c.members {
		if m.status == StatusAlive {
			alive = append(alive, *m)
		}
	}
	c.mu.Unlock()
	out := alive[:0]
	for _, m := range alive {
		c.mu.Lock()
		known := c.verified[m.meta.ID] == m.meta.Raft
		c.mu.Unlock()
		if !known {
			if err := c.verify(m.meta); err != nil {
				c.note(false, fmt.Sprintf("member %s does not count for bootstrap: %v", m.meta.ID, err))
				continue
			}
			c.mu.Lock()
			c.verified[m.meta.ID] = m.meta.Raft
			c.mu.Unlock()
		}
		out = append(out, m)
	}
	return out
}

// noBootstrap turns bootstrap off for good, noting why.
func (c *Cluster) noBootstrap(why string) {
	c.mu.Lock()
	c.expect = 0
	c.mu.Unlock()
	if why != "" {
		c.note(false, why)
	}
}

// note logs a bootstrap message once (the loop runs it on every event).
func (c *Cluster) note(isErr bool, msg string) {
	c.mu.Lock()
	dup := msg == c.lastNote
	c.lastNote = msg
	c.mu.Unlock()
	switch {
	case dup:
	case isErr:
		c.logger.Error(msg)
	default:
		c.logger.Info(msg)
	}
}
