package cluster

// reconcile makes the raft configuration follow gossip, on the leader
// only: alive members that are not voters (or are known at another raft
// address) are added as voters, and members that left gracefully are
// removed. Members that merely failed stay: a killed node must be able to
// come back, and removing it would shrink the quorum behind the
// operator's back.
func (c *Cluster) reconcile() {
	if c.node.Status().State != "leader" {
		return
	}
	if c.leaving.Load() {
		// Still a voter while leaving, so it may win an election; then it
		// must take itself out, as nobody else can while it leads.
		c.removeSelf()
		return
	}
	c.reconciles.Add(1)
	servers, err := c.node.Servers()
	if err != nil {
		c.logger.Warn("reconcile: reading the raft configuration", "error", err)
		return
	}
	type server struct {
		addr  string
		voter bool
	}
	inConfig := make(map[string]server, len(servers))
	for _, s := range servers {
		inConfig[s.ID] = server{s.Addr, s.Voter}
	}

	var add, remove []nodeMeta
	c.mu.Lock()
	for _, m := range c.members {
		s, ok := inConfig[m.meta.ID]
		switch {
		case m.status == StatusAlive && !c.leftGracefully(m) && (!ok || s.addr != m.meta.Raft || !s.voter):
			add = append(add, m.meta)
		case (m.status == StatusLeft || c.leftGracefully(m)) && ok && m.meta.ID != c.cfg.ID:
			remove = append(remove, m.meta)
		}
	}
	c.mu.Unlock()

	for _, m := range add {
		if err := c.node.AddVoter(m.ID, m.Raft); err != nil {
			c.logger.Warn("reconcile: adding voter", "id", m.ID, "raft", m.Raft, "error", err)
			continue
		}
		c.logger.Info("reconcile: added voter", "id", m.ID, "raft", m.Raft)
	}
	for _, m := range remove {
		if err := c.node.RemoveServer(m.ID); err != nil {
			c.logger.Warn("reconcile: removing server that left", "id", m.ID, "error", err)
			continue
		}
		c.logger.Info("reconcile: removed server that left", "id", m.ID)
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
