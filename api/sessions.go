package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

// POST /v1/sessions
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req CreateSessionRequest
	if err := s.decode(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd, err := createSessionCmd(req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Not retried on an unknown outcome: a second entry would open a
	// second session. An orphan expires after its TTL.
	res, _, err := s.propose(r.Context(), cmd, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, Session{ID: SessionID(res.Session), Name: cmd.Name, TTL: Duration(cmd.TTL),
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

// GET /v1/sessions
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	if err := s.readIndex(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var out []Session
	s.fsm.Read(func(t *lockstate.Table) {
		ss := t.Sessions()
		out = make([]Session, len(ss))
		for i, si := range ss {
			out[i] = sessionJSON(si)
		}
	})
	writeJSON(w, http.StatusOK, out)
}

// GET /v1/sessions/{id}
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	id, err := pathSession(r.PathValue("id"))
	if err == nil {
		err = s.readIndex(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var si lockstate.SessionInfo
	var ok bool
	s.fsm.Read(func(t *lockstate.Table) { si, ok = t.Session(lockstate.SessionID(id)) })
	if !ok {
		s.writeError(w, r, sessionNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, sessionJSON(si))
}

func sessionNotFound(id SessionID) error {
	return errorf(http.StatusNotFound, string(lockstate.CodeNoSession), "session %s not found", id)
}

// DELETE /v1/sessions/{id}
func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	id, err := pathSession(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Retried here rather than by propose: after an unknown outcome, a
	// repeat that finds no session means the first attempt closed it.
	cmd := &lockstate.CloseSession{Session: lockstate.SessionID(id)}
	res, _, err := s.propose(r.Context(), cmd, false)
	for i := 0; errors.Is(err, raftnode.ErrUnknownOutcome) && i < maxUnknownRetries; i++ {
		res, _, err = s.propose(r.Context(), cmd, false)
		var le *lockstate.Error
		if errors.As(err, &le) && le.Code == lockstate.CodeNoSession {
			res, err = &lockstate.Result{}, nil
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := CloseSessionResponse{ID: id, Released: []ReleasedLock{}, Cancelled: []string{}}
	for _, ev := range res.Events {
		switch {
		case ev.Session != lockstate.SessionID(id):
		case ev.Kind == lockstate.EvReleased:
			out.Released = append(out.Released, ReleasedLock{Name: ev.Name})
		case ev.Kind == lockstate.EvCancelled:
			out.Cancelled = append(out.Cancelled, ev.RequestID)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// POST /v1/sessions/{id}/keepalive
func (s *Server) keepAlive(w http.ResponseWriter, r *http.Request) {
	id, err := pathSession(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ProposeTimeout)
	defer cancel()
	ttl, err := s.node.KeepAlive(ctx, lockstate.SessionID(id))
	if errors.Is(err, raftnode.ErrSessionNotFound) {
		err = sessionNotFound(id)
	}
	if err != nil {
		s.writeError(w, r, fmt.Errorf("keepalive of session %s: %w", id, err))
		return
	}
	writeJSON(w, http.StatusOK, KeepAliveResponse{ID: id, TTL: Duration(ttl)})
}
