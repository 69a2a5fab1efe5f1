package api

import (
	"net/http"

	"github.com/lockd/lockd/lockstate"
)

// POST /v1/sessions
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req CreateSessionRequest
	if err := s.decode(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkText("session name", req.Name); err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := createSessionCmd(req)
	_, key, err := s.locks.CreateSession(r.Context(), cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, Session{ID: SessionID(key), Revoked: []Revocation{}, Name: cmd.Name, TTL: Duration(cmd.TTL),
		OnDeadlock: string(orDefault(cmd.OnDeadlock, lockstate.Abort)), Ordered: cmd.Ordered,
		LockDelay: Duration(cmd.LockDelay), Held: []HeldLock{}, Pending: []string{}})
}

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// GET /v1/sessions[?limit=N&after=ID]: the caller's sessions (a
// management token's: all), by id, one page; X-Next-After names the next.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	page, err := queryPage(r.URL.Query())
	var sessions []lockstate.SessionInfo
	var next string
	if err == nil {
		sessions, next, err = s.locks.Sessions(r.Context(), consistency(r), page)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]Session, len(sessions))
	for i, si := range sessions {
		out[i] = sessionJSON(si)
	}
	setNextAfter(w, next)
	writeJSON(w, http.StatusOK, out)
}

// GET /v1/sessions/{id}
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	info, err := s.locks.Session(r.Context(), consistency(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionJSON(info))
}

// DELETE /v1/sessions/{id}
func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	key := SessionID(r.PathValue("id"))
	closed, err := s.locks.CloseSession(r.Context(), string(key))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := CloseSessionResponse{ID: key, Released: make([]ReleasedLock, len(closed.Released)), Cancelled: closed.Cancelled}
	for i, name := range closed.Released {
		out.Released[i] = ReleasedLock{Name: name}
	}
	writeJSON(w, http.StatusOK, out)
}

// POST /v1/sessions/{id}/keepalive
func (s *Server) keepAlive(w http.ResponseWriter, r *http.Request) {
	key := SessionID(r.PathValue("id"))
	alive, err := s.locks.KeepAlive(r.Context(), string(key))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, KeepAliveResponse{ID: key, TTL: Duration(alive.TTL), Revoked: revocationsJSON(alive.Revoked)})
}
