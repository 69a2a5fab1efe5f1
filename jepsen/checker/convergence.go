package checker

import "fmt"

// NodeState is what one node reported after the run: its applied Raft
// index and a digest of its lock table, or the error that kept it from
// answering.
type NodeState struct {
	Node         string `json:"node"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"`
	Err          string `json:"err,omitempty"`
}

// Convergence is valid iff every node answered and all report the same
// (non-zero) applied index and the same (non-empty) digest.
func Convergence(nodes []NodeState) Result {
	r := newResult("convergence")
	cfg := Config{}
	r.Counts["nodes"] = len(nodes)
	if len(nodes) == 0 {
		r.Verdict = Unknown
		r.Note = "no nodes"
		return r
	}
	var ref *NodeState
	for i := range nodes {
		n := &nodes[i]
		if n.Err != "" {
			r.Counts["unanswered"]++
			r.anomaly(cfg, "node %s did not answer: %s", n.Node, n.Err)
			continue
		}
		if n.AppliedIndex == 0 || n.Digest == "" {
			r.anomaly(cfg, "node %s reported nothing to compare (applied index %d, digest %q)", n.Node, n.AppliedIndex, n.Digest)
		}
		if ref == nil {
			ref = n
			continue
		}
		if n.AppliedIndex != ref.AppliedIndex {
			r.anomaly(cfg, "node %s applied index %d, node %s %d", n.Node, n.AppliedIndex, ref.Node, ref.AppliedIndex)
		}
		if n.Digest != ref.Digest {
			r.anomaly(cfg, "node %s digest %s, node %s %s", n.Node, n.Digest, ref.Node, ref.Digest)
		}
	}
	if ref != nil {
		r.Note = fmt.Sprintf("applied index %d", ref.AppliedIndex)
	}
	return r
}
