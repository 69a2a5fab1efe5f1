package api

import (
	"net/http"
	"net/url"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/lockstate"
)

// POST /v1/acquire
func (s *Server) acquireJSON(w http.ResponseWriter, r *http.Request) {
	var req wire.AcquireRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.acquire(w, r, req)
}

// acquire answers an acquire's outcome: granted, or why not.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request, req wire.AcquireRequest) {
	if err := checkNames(req.Locks); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Wait > 0 {
		release, err := s.waitSlot(w)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer release()
	}
	info, err := s.locks.Acquire(r.Context(), string(req.Session), acquireCmd(req))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, grantedJSON(info))
}

// GET /v1/requests/{id}[?session=ID][&wait=30s]
func (s *Server) getRequest(w http.ResponseWriter, r *http.Request) {
	wait, err := queryDuration(r.URL.Query(), "wait")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	session, err := optionalSession(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if wait > 0 {
		release, err := s.waitSlot(w)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer release()
	}
	info, err := s.locks.Request(r.Context(), consistency(r), string(session), r.PathValue("id"), wait)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, requestJSON(info))
}

// DELETE /v1/requests/{id}[?session=ID]
func (s *Server) cancelRequest(w http.ResponseWriter, r *http.Request) {
	session, err := optionalSession(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.locks.Cancel(r.Context(), string(session), &lockstate.Cancel{RequestID: r.PathValue("id")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, requestJSON(info))
}

// optionalSession reads the session parameter that narrows a request id
// to one session's request: "" when it is absent, refused when empty.
func optionalSession(q url.Values) (wire.SessionID, error) {
	if !q.Has("session") {
		return "", nil
	}
	return querySession(q)
}
