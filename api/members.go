package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/lockd/lockd/raftnode"
)

// headerForwarded marks a membership call forwarded to the leader, which
// must answer it itself: no forwarding loops.
const headerForwarded = "X-Lockd-Forwarded"

// DELETE /v1/members/{id}: remove a server from the raft configuration —
// for a node that died for good and will not come back (a graceful
// `lockd leave` removes itself). Served by the leader; forwarded there.
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st := s.node.Status()
	if st.State != "leader" {
		s.forwardToLeader(w, r, st.LeaderID)
		return
	}
	if id == st.ID {
		s.writeError(w, r, invalid("the leader %s cannot remove itself: use `lockd leave` on it", id))
		return
	}
	if err := s.node.RemoveServer(id); err != nil {
		if errors.Is(err, raftnode.ErrNotLeader) {
			err = errors.Join(err, raftnode.ErrNoLeader) // lost leadership meanwhile: retry
		}
		s.writeError(w, r, fmt.Errorf("remove %s: %w", id, err))
		return
	}
	s.log.Info("removed a server from the raft configuration", "id", id)
	writeJSON(w, http.StatusOK, map[string]any{"removed": id, "members": s.members()})
}

// forwardToLeader replays a bodiless membership call on the leader.
func (s *Server) forwardToLeader(w http.ResponseWriter, r *http.Request, leader string) {
	addr, ok := "", false
	if leader != "" {
		addr, ok = s.peerHTTP(leader)
	}
	if !ok || r.Header.Get(headerForwarded) != "" {
		s.writeError(w, r, noLeader("no leader to serve %s %s; retry", r.Method, r.URL.Path))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ProposeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+r.URL.RequestURI(), nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req.Header.Set(headerForwarded, s.node.Status().ID)
	resp, err := (&http.Client{Timeout: s.cfg.ProposeTimeout + time.Second}).Do(req)
	if err != nil {
		s.writeError(w, r, noLeader("forwarding to leader %s at %s: %v", leader, addr, err))
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
