package api

import (
	"net/http"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/lockstate"
)

// POST /v1/sessions
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateSessionRequest
	if err := s.decode(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkText("session name", req.Name); err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := createSessionCmd(req)
	id, key, err := s.locks.CreateSession(r.Context(), cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.setTableTime(w)
	writeJSON(w, http.StatusCreated, wire.Session{ID: key, Revoked: []wire.Revocation{}, Name: cmd.Name, TTL: wire.Duration(cmd.TTL),
		OnDeadlock: string(orDefault(cmd.OnDeadlock, lockstate.Abort)), Ordered: cmd.Ordered,
		LockDelay: wire.Duration(cmd.LockDelay), Held: []wire.HeldLock{}, Pending: []string{}, Since: s.locks.Since(uint64(id))})
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
	out := make([]wire.Session, len(sessions))
	for i, si := range sessions {
		out[i] = sessionJSON(si, s.locks.Since)
	}
	setNextAfter(w, next)
	s.setTableTime(w)
	writeJSON(w, http.StatusOK, out)
}

// GET /v1/sessions/{id}
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	info, err := s.locks.Session(r.Context(), consistency(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.setTableTime(w)
	writeJSON(w, http.StatusOK, sessionJSON(info, s.locks.Since))
}

// DELETE /v1/sessions/{id}
func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("id")
	closed, err := s.locks.CloseSession(r.Context(), key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wire.CloseSessionResponse{ID: key, Released: make([]wire.ReleasedLock, len(closed.Released)), Cancelled: closed.Cancelled}
	for i, name := range closed.Released {
		out.Released[i] = wire.ReleasedLock{Name: name}
	}
	writeJSON(w, http.StatusOK, out)
}

// POST /v1/sessions/{id}/keepalive
func (s *Server) keepAlive(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("id")
	alive, err := s.locks.KeepAlive(r.Context(), key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.KeepAliveResponse{ID: key, TTL: wire.Duration(alive.TTL), Revoked: revocationsJSON(alive.Revoked)})
}

// POST /v1/sessions/keepalive: many sessions' keepalives in one request,
// each answered as its own keepalive would be; an error of the whole
// (no leader, no token) answers as that call's would.
func (s *Server) keepAlives(w http.ResponseWriter, r *http.Request) {
	var req wire.KeepAlivesRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Sessions) == 0 {
		s.writeError(w, r, invalid("sessions: name at least one session"))
		return
	}
	kept, err := s.locks.KeepAliveMany(r.Context(), req.Sessions)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wire.KeepAlivesResponse{Sessions: make([]wire.KeptSession, len(kept))}
	for i, k := range kept {
		out.Sessions[i] = wire.KeptSession{ID: k.Session}
		if k.Err != nil {
			e := toError(k.Err, s.noLeaderView)
			s.denied(r, e) // counted and logged as a refused keepalive of its own would be
			out.Sessions[i].Error, out.Sessions[i].Status = &wire.ErrorDetail{Code: e.Code, Message: e.Message}, e.Status
			continue
		}
		out.Sessions[i].TTL, out.Sessions[i].Revoked = wire.Duration(k.TTL), revocationsJSON(k.Revoked)
	}
	writeJSON(w, http.StatusOK, out)
}
