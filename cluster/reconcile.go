package cluster

import (
	"context"
	"fmt"
	"net"
	"time"
)

// reconcile makes the raft configuration follow gossip, on the leader
// only: alive members that are not voters (or are known at another raft
// address) are added as voters once admit accepts them, and members that
// left gracefully are removed. Members that merely failed stay: a killed
// node must be able to come back, and removing it would shrink the
// quorum behind the operator's back.
func (c *Cluster) reconcile() {
	if c.node.Status().State != "leader" {
		c.logFormat.Store(0) // a leader to be must look at its voters again
		return
	}
	if c.leaving.Load() {
		// Still a voter while leaving, so it may win an election; then it
		// must take itself out, as nobody else can while it leads.
		c.removeSelf()
		return
	}
	c.reconciles.Add(1)
	add, remove, err := c.plan()
	if err != nil {
		c.logger.Warn("reconcile: reading the raft configuration", "error", err)
		return
	}
	c.updateLogFormat()
	for _, m := range add {
		// Being in the gossip pool is not enough to vote: a voter that
		// is not a real, live server counts towards the quorum without
		// helping to reach it.
		if err := c.admit(m); err != nil {
			c.refuse(m.meta, err)
			continue
		}
		if err := c.node.AddVoter(m.meta.ID, m.meta.Raft); err != nil {
			c.logger.Warn("reconcile: adding voter", "id", m.meta.ID, "raft", m.meta.Raft, "error", err)
			continue
		}
		c.logger.Info("reconcile: added voter", "id", m.meta.ID, "raft", m.meta.Raft)
	}
	for _, m := range remove {
		if err := c.node.RemoveServer(m.ID); err != nil {
			c.logger.Warn("reconcile: removing server that left", "id", m.ID, "error", err)
			continue
		}
		c.logger.Info("reconcile: removed server that left", "id", m.ID)
	}
}

// plan compares the members with the raft configuration: alive members
// to add as voters, and members that left to remove.
//
// A leave intent is gossip, which anyone with the gossip key can forge:
// it removes a member only once that member is gone from the pool too,
// and never where peers are verified (VerifyPeer set): there a leaving
// node removes itself through the leader over mutual TLS
// (removeThroughLeader), and an operator removes a dead one.
func (c *Cluster) plan() (add []member, remove []nodeMeta, err error) {
	servers, err := c.node.Servers()
	if err != nil {
		return nil, nil, err
	}
	type server struct {
		addr  string
		voter bool
	}
	inConfig := make(map[string]server, len(servers))
	for _, s := range servers {
		inConfig[s.ID] = server{s.Addr, s.Voter}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		s, ok := inConfig[m.meta.ID]
		switch {
		case c.wanted(m) && (!ok || s.addr != m.meta.Raft || !s.voter):
			add = append(add, *m)
		case ok && m.meta.ID != c.cfg.ID && c.cfg.VerifyPeer == nil && m.status != StatusAlive &&
			(m.status == StatusLeft || c.leftGracefully(m)):
			remove = append(remove, m.meta)
		}
	}
	return add, remove, nil
}

// wanted reports whether m belongs in the raft configuration as gossip
// sees it: alive, and its current instance did not announce that it
// leaves. Reconciliation adds such a member whenever it is missing (once
// admit accepts it); c.mu must be held.
func (c *Cluster) wanted(m *member) bool {
	return m.status == StatusAlive && !c.leftGracefully(m)
}

// live is the leader's remove rule (raftnode.Node.SetRemoveRule): an
// operator's removal of a member reconciliation wants is refused, as the
// member would be added back within a round.
//
// Alive includes suspect: memberlist v0.6.0 does not report suspicion
// (memberlist #293), and a suspect member may refute it (a slow or
// briefly cut off node) and be added back. A killed node is declared
// dead after memberlist's suspicion timeout (about 6–8 s with lockd's
// LAN settings, 3 or 5 nodes), and then its removal lasts. A member
// gossip has not seen (unknown), or one that left, is not added back,
// so it may be removed. A dead member removed that comes back later is
// added again by reconciliation, by design, as after Consul's
// force-leave: the removal is for a node gone for good.
func (c *Cluster) live(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[id]
	return m != nil && c.wanted(m)
}

// admit decides whether a member may become a voter. It must answer a
// direct gossip ping from this node now: memberlist v0.6.0 does not tell
// us when it suspects a member (memberlist #293), so a member that
// stopped answering shows alive until it is declared dead, and adding
// it then would leave a dead voter. And Config.VerifyPeer, if set, must
// accept it. This node itself is trusted.
func (c *Cluster) admit(m member) error {
	if m.meta.ID == c.cfg.ID {
		return nil
	}
	addr, err := net.ResolveUDPAddr("udp", m.gossip)
	if err != nil {
		return fmt.Errorf("gossip address %q: %w", m.gossip, err)
	}
	if _, err := c.ml.Ping(m.meta.ID, addr); err != nil {
		return fmt.Errorf("not answering a gossip ping: %w", err)
	}
	if err := c.verify(m.meta); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.refused, m.meta.ID)
	c.mu.Unlock()
	return nil
}

// verify runs Config.VerifyPeer, if set, on a member.
func (c *Cluster) verify(m nodeMeta) error {
	if c.cfg.VerifyPeer == nil || m.ID == c.cfg.ID {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, verifyTimeout)
	defer cancel()
	if err := c.cfg.VerifyPeer(ctx, m.ID, m.Raft); err != nil {
		return fmt.Errorf("peer verification failed: %w", err)
	}
	return nil
}

// refuse logs why a member is not added as a voter, once per member and
// reason: the loop retries every few seconds, and one line per failure
// is enough for the operator.
func (c *Cluster) refuse(m nodeMeta, err error) {
	why := err.Error()
	c.mu.Lock()
	dup := c.refused[m.ID] == why
	c.refused[m.ID] = why
	c.mu.Unlock()
	if !dup {
		c.logger.Warn("reconcile: not adding member as a voter; will retry", "id", m.ID, "raft", m.Raft, "error", err)
	}
}

// removeSelf takes this node, the leader, out of the raft configuration
// when others remain; raft commits that and then steps down.
func (c *Cluster) removeSelf() {
	servers, err := c.node.Servers()
	if err != nil || len(servers) < 2 {
		return
	}
	if err := c.node.RemoveServer(c.cfg.ID); err != nil {
		c.logger.Warn("leaving leader could not remove itself", "error", err)
		return
	}
	c.logger.Info("leaving leader removed itself from the raft configuration")
}

// removeThroughLeader takes this leaving node out of the raft
// configuration by asking the leader (over the node port: mutual TLS when
// configured), so that no gossip message is needed to remove a voter. The
// leader itself is removed by removeSelf.
func (c *Cluster) removeThroughLeader(timeout time.Duration) {
	if c.node.Status().State == "leader" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.node.RemoveSelf(ctx); err != nil {
		c.logger.Warn("leaving: the leader did not remove this node; an operator can (DELETE /v1/members/{id})",
			"error", err)
	}
}

// LogFormat is the newest log entry format that every voter applies, as
// this node last saw the voters and their gossiped metadata (fsm.Format):
// the leader writes no newer one, so a voter of an older build never meets
// an entry it cannot apply during a rolling upgrade. It is 0, not known,
// until a reconciliation as leader has looked (and again once this node is
// not the leader), and counts 1 for any voter whose metadata is unknown.
func (c *Cluster) LogFormat() int { return int(c.logFormat.Load()) }

// updateLogFormat recomputes LogFormat from the raft configuration.
func (c *Cluster) updateLogFormat() {
	servers, err := c.node.Servers()
	if err != nil {
		return // keep the last value; the next round tries again
	}
	c.mu.Lock()
	format := c.meta.Log
	for _, s := range servers {
		voterFormat := 1
		if m := c.members[s.ID]; m != nil && m.meta.Log > 0 {
			voterFormat = m.meta.Log
		}
		if s.Voter {
			format = min(format, voterFormat)
		}
	}
	c.mu.Unlock()
	if old := c.logFormat.Swap(int64(format)); old != int64(format) {
		c.logger.Info("log entry format every voter applies", "format", format, "was", old)
	}
}
