package api

import (
	"encoding/hex"
	"net/http"
	"slices"
	"strings"

	"github.com/lockd/lockd/api/wire"
)

// GET /v1/status: this node's own view, never forwarded, so that an
// operator (and the health check) can see a node that has no leader.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st := s.node.Status()
	out := wire.StatusResponse{NodeID: st.ID, State: st.State, Term: st.Term, CommitIndex: st.CommitIndex,
		Leader: wire.Leader{ID: st.LeaderID}, LogStore: st.LogStore}
	if st.LeaderID != "" {
		out.Leader.HTTPAddr, _ = s.peerHTTP(st.LeaderID)
	}
	applied := s.locks.Applied() // the digest is the table's at exactly that index
	out.AppliedIndex = applied.Index
	out.Digest = hex.EncodeToString(applied.Digest[:])
	out.Members = s.members()
	dc := s.node.DigestChecks()
	out.DigestChecks = wire.DigestChecks{Compared: dc.Compared, Mismatches: dc.Mismatches, LastMismatchIndex: dc.LastMismatchIndex}
	out.Diverged = s.node.Diverged()
	q := s.node.Quorum()
	out.QuorumLost = q.Lost
	out.Quorum = wire.Quorum{Voters: q.Voters, Reachable: q.Reachable, Needed: q.Needed}
	if out.Quorum.Reachable == nil {
		out.Quorum.Reachable = []string{}
	}
	writeJSON(w, http.StatusOK, out)
}

// peerHTTP returns a node's HTTP address, this node's own included.
func (s *Server) peerHTTP(id string) (string, bool) {
	if s.cfg.PeerHTTP != nil {
		if addr, ok := s.cfg.PeerHTTP(id); ok {
			return addr, true
		}
	}
	if id == s.node.Status().ID && s.cfg.HTTPAddr != "" {
		return s.cfg.HTTPAddr, true
	}
	return "", false
}

// members merges the gossip view with the raft configuration: a member
// gossip sees but raft does not is not a voter (yet); a raft server gossip
// does not see has status "unknown".
func (s *Server) members() []wire.Member {
	byID := map[string]*wire.Member{}
	var out []*wire.Member
	add := func(id string) *wire.Member {
		if m := byID[id]; m != nil {
			return m
		}
		m := &wire.Member{ID: id, Status: "unknown"}
		byID[id] = m
		out = append(out, m)
		return m
	}
	if s.cfg.Members != nil {
		for _, gm := range s.cfg.Members() {
			m := add(gm.ID)
			*m = gm
			m.Voter = false
		}
	}
	servers, err := s.node.Servers()
	if err != nil {
		s.log.Debug("raft configuration unavailable", "error", err)
	}
	for _, sv := range servers {
		m := add(sv.ID)
		m.Voter = sv.Voter
		if m.RaftAddr == "" {
			m.RaftAddr = sv.Addr
		}
	}
	self := s.node.Status().ID
	if s.cfg.Members == nil && self != "" {
		if m := add(self); m.Status == "unknown" {
			m.Status = "alive"
		}
	}
	res := make([]wire.Member, 0, len(out))
	for _, m := range out {
		if m.HTTPAddr == "" {
			m.HTTPAddr, _ = s.peerHTTP(m.ID)
		}
		res = append(res, *m)
	}
	slices.SortFunc(res, func(a, b wire.Member) int { return strings.Compare(a.ID, b.ID) })
	return res
}

// POST /v1/agent/leave: leave the cluster for good (removed from the raft
// configuration), then stop. A restart is not a leave: SIGTERM only stops.
func (s *Server) leave(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Leave == nil {
		s.writeError(w, r, invalid("this node has no cluster membership to leave (--dev)"))
		return
	}
	writeJSON(w, http.StatusAccepted, wire.LeaveResponse{NodeID: s.node.Status().ID, Leaving: true})
	go s.cfg.Leave()
}
