package api

import (
	"net/http"
	"strings"

	"github.com/lockd/lockd/api/wire"
)

// stopWhenDiverged answers 503 diverged to every request of a node whose
// state diverged, but for what an operator needs to see it: GET
// /v1/status (which names the divergence), /metrics and the dashboard's
// files. It runs before authentication, which reads the table too.
func (s *Server) stopWhenDiverged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what := s.node.Diverged()
		if what == "" || seesDivergence(r) {
			next.ServeHTTP(w, r)
			return
		}
		e := errorf(wire.CodeDiverged, "this node's state diverged from the leader's (%s): it serves nothing from its table "+
			"until an operator replaces its data (docs/operations.md); ask another node", what)
		e.NotApplied = true // it answers before doing anything: another node may be asked anything
		s.writeError(w, r, e)
	})
}

// seesDivergence reports whether r is one a diverged node still answers.
func seesDivergence(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	p := r.URL.Path
	return p == "/v1/status" || p == "/metrics" || p == "/ui" || strings.HasPrefix(p, "/ui/")
}
