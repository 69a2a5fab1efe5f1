package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// DELETE /v1/members/{id}: remove a server from the raft configuration —
// for a node that died for good and will not come back (a graceful
// `lockd leave` removes itself). The leader does it; any node forwards.
// The leader refuses a member its gossip sees alive (409 member_alive),
// which it would add back.
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ProposeTimeout)
	defer cancel()
	if err := s.node.RemoveMember(ctx, id); err != nil {
		switch {
		case errors.Is(err, lockservice.ErrRemoveLeader):
			err = invalid("%s is the leader and cannot remove itself: use `lockd leave` on it", id)
		case errors.Is(err, lockservice.ErrMemberAlive):
			err = memberAlive(id)
		}
		s.writeError(w, r, fmt.Errorf("remove %s: %w", id, err))
		return
	}
	s.log.Info("removed a server from the raft configuration", "id", id)
	writeJSON(w, http.StatusOK, wire.RemoveMemberResponse{Removed: id, Members: s.members()})
}

// operator guards an endpoint that changes the cluster itself (see
// mayOperate).
func (s *Server) operator(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.mayOperate(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r)
	}
}
