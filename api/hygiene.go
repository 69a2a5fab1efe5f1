package api

import (
	"mime"
	"net/http"
	"slices"
	"strings"
)

// Request hygiene that comes before any handler: bodies must say they are
// JSON, and browsers get cross-origin access only from origins an
// operator named.

// requireJSON answers 415 to a request that carries a body without
// Content-Type application/json. A web page may POST text/plain to any
// address without asking the browser's permission first (a "simple"
// request); insisting on JSON makes the browser ask, and without CORS
// headers it is refused.
func (s *Server) requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				s.writeError(w, r, notJSON(
					"a request body must be JSON, sent with Content-Type: application/json (got %q)", r.Header.Get("Content-Type")))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hasBody reports whether r carries a body (a declared length, or a
// chunked one of unknown length).
func hasBody(r *http.Request) bool {
	return r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody)
}

// cors adds CORS headers for the configured origins only, and answers
// their preflight requests. Without Config.AllowedOrigins there are no
// CORS headers at all: browsers keep other sites' pages out.
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.cfg.AllowedOrigins) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Vary", "Origin") // the answer depends on it: caches must not mix origins
		origin := r.Header.Get("Origin")
		if origin == "" || !slices.Contains(s.cfg.AllowedOrigins, origin) {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "X-Lock-Index, X-Next-After")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ParseOrigins splits a comma-separated list of origins
// ("https://ops.example.com,http://localhost:3000") and checks each is a
// scheme and host without a path: exact origins only, no "*" (the API
// takes tokens; a wildcard would hand them to every site).
func ParseOrigins(list string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(list, ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		if strings.Contains(o, "*") {
			return nil, invalid("origin %q: wildcards are not accepted, name each origin", o)
		}
		scheme, host, ok := strings.Cut(o, "://")
		if !ok || (scheme != "http" && scheme != "https") || host == "" || strings.ContainsAny(host, "/?#*") {
			return nil, invalid("origin %q is not scheme://host[:port]", o)
		}
		out = append(out, o)
	}
	return out, nil
}
