package cluster

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// Leaving gracefully and failing look the same to memberlist's event
// delegate: NotifyLeave never says which (Node.State is not set,
// memberlist #293). So, like Serf, a leaving node first gossips a leave
// intent as a user message, then leaves memberlist. The others record the
// intent per node instance; a member that is gone with a matching intent
// left, one without failed. Intents travel in the broadcast queue (each
// receiver passes a new one on once) and in push/pull state, so a node
// that missed the broadcast learns it at the next sync.

// leaveIntent says that one instance of a node is leaving for good. The
// instance (random per start) keeps an old intent from marking a node
// that has since come back.
type leaveIntent struct {
	ID       string `json:"id"`
	Instance string `json:"inst"`
}

// intentBroadcast is a leave intent in memberlist's broadcast queue.
type intentBroadcast struct {
	msg  []byte
	id   string
	done chan struct{} // closed when memberlist is done sending it; may be nil
}

func (b *intentBroadcast) Invalidates(other memberlist.Broadcast) bool {
	o, ok := other.(*intentBroadcast)
	return ok && o.id == b.id
}
func (b *intentBroadcast) Message() []byte { return b.msg }
func (b *intentBroadcast) Finished() {
	if b.done != nil {
		close(b.done)
	}
}

// queueIntent gossips an intent; done (optional) is closed once it has
// been sent as often as memberlist retransmits a broadcast.
func (c *Cluster) queueIntent(in leaveIntent, done chan struct{}) {
	msg, err := json.Marshal(in)
	if err != nil {
		c.logger.Error("encode leave intent", "error", err)
		if done != nil {
			close(done)
		}
		return
	}
	c.broadcasts.QueueBroadcast(&intentBroadcast{msg: msg, id: in.ID, done: done})
}

// announceLeave gossips our leave intent and waits, within timeout, until
// it has been sent, so it reaches the others before the leave itself.
func (c *Cluster) announceLeave(timeout time.Duration) {
	c.mu.Lock()
	in := leaveIntent{ID: c.cfg.ID, Instance: c.meta.Instance}
	c.intents[in.ID] = in.Instance
	c.mu.Unlock()
	done := make(chan struct{})
	c.queueIntent(in, done)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.logger.Warn("leave intent not fully gossiped in time", "timeout", timeout)
	}
}

// recordIntents stores intents learned from others and reports which were
// new. A member that is already gone becomes left.
func (c *Cluster) recordIntents(ins []leaveIntent) (fresh []leaveIntent) {
	c.mu.Lock()
	for _, in := range ins {
		if in.ID == "" || in.ID == c.cfg.ID || c.intents[in.ID] == in.Instance {
			continue
		}
		if m := c.members[in.ID]; m != nil && m.meta.Instance != in.Instance && m.status == StatusAlive {
			continue // from an earlier life of a node that is back
		}
		c.intents[in.ID] = in.Instance
		if m := c.members[in.ID]; m != nil && m.status == StatusDead && m.meta.Instance == in.Instance {
			m.status = StatusLeft
		}
		fresh = append(fresh, in)
	}
	c.mu.Unlock()
	return fresh
}

// leftGracefully reports whether a member's current instance announced
// that it leaves; c.mu must be held.
func (c *Cluster) leftGracefully(m *member) bool {
	inst, ok := c.intents[m.meta.ID]
	return ok && inst == m.meta.Instance
}

// NotifyMsg receives gossiped leave intents and passes new ones on.
func (d delegate) NotifyMsg(b []byte) {
	var in leaveIntent
	if err := json.Unmarshal(b, &in); err != nil {
		d.c.logger.Warn("ignoring unknown gossip message", "error", err)
		return
	}
	for _, in := range d.c.recordIntents([]leaveIntent{in}) {
		d.c.logger.Info("member announced it leaves", "id", in.ID)
		d.c.queueIntent(in, nil)
		d.c.wakeLoop()
	}
}

// GetBroadcasts hands memberlist our queued gossip.
func (d delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.c.broadcasts.GetBroadcasts(overhead, limit)
}

// LocalState sends every known intent in push/pull syncs.
func (d delegate) LocalState(join bool) []byte {
	d.c.mu.Lock()
	ins := make([]leaveIntent, 0, len(d.c.intents))
	for id, inst := range d.c.intents {
		ins = append(ins, leaveIntent{ID: id, Instance: inst})
	}
	d.c.mu.Unlock()
	slices.SortFunc(ins, func(a, b leaveIntent) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	b, err := json.Marshal(ins)
	if err != nil {
		return nil
	}
	return b
}

// MergeRemoteState learns the intents a peer knows.
func (d delegate) MergeRemoteState(buf []byte, join bool) {
	if len(buf) == 0 {
		return
	}
	var ins []leaveIntent
	if err := json.Unmarshal(buf, &ins); err != nil {
		d.c.logger.Warn("ignoring peer state", "error", fmt.Errorf("decode leave intents: %w", err))
		return
	}
	if len(d.c.recordIntents(ins)) > 0 {
		d.c.wakeLoop()
	}
}
