package cluster

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// nodeMeta is what a node tells the others about itself through
// memberlist's node metadata (at most memberlist.MetaMaxSize bytes).
type nodeMeta struct {
	ID     string `json:"id"`
	Raft   string `json:"raft"`             // raft address
	HTTP   string `json:"http"`             // HTTP address (API and internal forwarding)
	Expect int    `json:"expect,omitempty"` // --bootstrap-expect; 0 means join and wait
	State  bool   `json:"state,omitempty"`  // has raft state: must never be bootstrapped
	// Instance is random per start: it tells a node's lives apart, so an
	// old leave intent does not apply to a node that came back.
	Instance string `json:"inst"`
	// Log is the newest log entry format the node's build applies
	// (fsm.Format); absent (0) in builds before it was gossiped, which
	// apply format 1 only.
	Log int `json:"log,omitempty"`
}

func (m nodeMeta) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode node metadata: %w", err)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cluster: node metadata is %d bytes, more than memberlist's %d", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

func decodeMeta(b []byte) (nodeMeta, error) {
	var m nodeMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nodeMeta{}, fmt.Errorf("cluster: decode node metadata: %w", err)
	}
	if m.ID == "" || m.Raft == "" {
		return nodeMeta{}, fmt.Errorf("cluster: node metadata without id or raft address")
	}
	return m, nil
}

// delegate gives memberlist our metadata and carries leave intents (see
// leave.go).
type delegate struct{ c *Cluster }

func (d delegate) NodeMeta(limit int) []byte {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	if len(d.c.metaBytes) > limit {
		return nil // cannot happen: encode checked MetaMaxSize
	}
	return d.c.metaBytes
}

// events records membership changes. memberlist calls it synchronously
// and never concurrently; it only updates the member map and wakes the
// cluster loop.
type events struct{ c *Cluster }

func (e events) NotifyJoin(n *memberlist.Node)   { e.c.observe(n, false) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.c.observe(n, false) }

// NotifyLeave cannot tell a leave from a failure by itself (memberlist
// #293); observe decides with the leave intents.
func (e events) NotifyLeave(n *memberlist.Node) { e.c.observe(n, true) }
