package api

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/lockd/lockd/api/wire"
)

// uiFiles is the web dashboard (plain HTML/CSS/JS, no build step), served
// at /ui/ on every node. It reads GET /v1/status, /v1/locks and
// /v1/waitgraph of the node that serves it whenever that node's event
// stream (GET /v1/events) reports a change, and every few seconds.
//
//go:embed ui
var uiFiles embed.FS

// uiHandler serves the embedded dashboard under /ui/.
func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Always revalidate: a node upgraded in place must not serve a
		// stale script next to a newer API.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if name := strings.TrimPrefix(r.URL.Path, "/ui/"); name != "" && !fs.ValidPath(name) {
			http.NotFound(w, r) // not a file name (invalid UTF-8, ".."): the FS would answer 500
			return
		}
		files.ServeHTTP(w, r)
	})
}

// GET /v1/waitgraph: the wait-for graph of the table, sorted (the
// dashboard draws it). Linearizable unless ?stale.
func (s *Server) waitGraph(w http.ResponseWriter, r *http.Request) {
	edges, err := s.locks.WaitGraph(r.Context(), consistency(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]wire.WaitEdge, len(edges))
	for i, e := range edges {
		out[i] = wire.WaitEdge{From: e.FromKey, To: e.ToKey}
	}
	writeJSON(w, http.StatusOK, out)
}
