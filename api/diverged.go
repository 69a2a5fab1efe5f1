package api

import (
	"net/http"
	"strings"
)

// CodeDiverged: this node's table differs from the leader's at the same
// applied index (raftnode: divergence stops the node); it answers
// nothing from it until an operator replaces its data. Ask another node.
const CodeDiverged = "diverged"

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
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, CodeDiverged,
			"this node's state diverged from the leader's (%s): it serves nothing from its table until an operator "+
				"replaces its data (docs/operations.md); ask another node", what))
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
