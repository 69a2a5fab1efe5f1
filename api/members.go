package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/lockd/lockd/raftnode"
)

// DELETE /v1/members/{id}: remove a server from the raft configuration —
// for a node that died for good and will not come back (a graceful
// `lockd leave` removes itself). The leader does it; any node forwards.
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ProposeTimeout)
	defer cancel()
	if err := s.node.RemoveMember(ctx, id); err != nil {
		if errors.Is(err, raftnode.ErrRemoveLeader) {
			err = invalid("%s is the leader and cannot remove itself: use `lockd leave` on it", id)
		}
		s.writeError(w, r, fmt.Errorf("remove %s: %w", id, err))
		return
	}
	s.log.Info("removed a server from the raft configuration", "id", id)
	writeJSON(w, http.StatusOK, map[string]any{"removed": id, "members": s.members()})
}

// operator guards an endpoint that changes the cluster itself: with
// Config.OperatorCert it answers only a client that presented a
// certificate signed by the cluster's CA.
func (s *Server) operator(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.OperatorCert && (r.TLS == nil || len(r.TLS.PeerCertificates) == 0) {
			s.writeError(w, r, errorf(http.StatusUnauthorized, CodeUnauthorized,
				"%s %s changes the cluster: present a client certificate signed by the cluster's CA (lockd tls cert --client)",
				r.Method, r.URL.Path))
			return
		}
		h(w, r)
	}
}
