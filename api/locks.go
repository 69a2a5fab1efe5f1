package api

import (
	"net/http"
	"strconv"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// PUT /v1/locks/{name...}?session=ID&mode=write&wait=30s[&weight=&limit=&hold_ttl=&request_id=&value=]
func (s *Server) acquireOne(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sess, err := querySession(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	mode, err := lockstate.ParseMode(q.Get("mode"))
	if err != nil {
		s.writeError(w, r, invalid("%v", err))
		return
	}
	req := wire.AcquireRequest{Session: sess, RequestID: q.Get("request_id"),
		Locks: []wire.LockSpec{{Name: r.PathValue("name"), Mode: wire.Mode(mode.String()), Value: q.Get("value")}}}
	for _, p := range []struct {
		key string
		dst *wire.Duration
	}{{"wait", &req.Wait}, {"hold_ttl", &req.HoldTTL}} {
		d, err := queryDuration(q, p.key)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		*p.dst = wire.Duration(d)
	}
	for _, p := range []struct {
		key string
		dst *int
	}{{"weight", &req.Locks[0].Weight}, {"limit", &req.Locks[0].Limit}} {
		if *p.dst, err = queryInt(q, p.key); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.acquire(w, r, req)
}

// DELETE /v1/locks/{name...}?session=ID
func (s *Server) releaseOne(w http.ResponseWriter, r *http.Request) {
	sess, err := querySession(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.doRelease(w, r, wire.ReleaseRequest{Session: sess, Name: r.PathValue("name")})
}

// POST /v1/release
func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	var req wire.ReleaseRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.doRelease(w, r, req)
}

func (s *Server) doRelease(w http.ResponseWriter, r *http.Request, req wire.ReleaseRequest) {
	if err := checkLockName(req.Name); err != nil {
		s.writeError(w, r, err)
		return
	}
	names, err := s.locks.Release(r.Context(), string(req.Session), &lockstate.Release{Name: req.Name, RequestID: req.RequestID})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wire.ReleaseResponse{Released: make([]wire.ReleasedLock, len(names))}
	for i, name := range names {
		out.Released[i] = wire.ReleasedLock{Name: name}
	}
	writeJSON(w, http.StatusOK, out)
}

// POST /v1/surrender
func (s *Server) surrender(w http.ResponseWriter, r *http.Request) {
	var req wire.SurrenderRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	err := checkLockName(req.Name)
	var kept bool
	if err == nil {
		kept, err = s.locks.Surrender(r.Context(), string(req.Session), &lockstate.Surrender{Name: req.Name})
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := "surrendered"
	if kept {
		status = "kept"
	}
	writeJSON(w, http.StatusOK, wire.SurrenderResponse{Status: status, Name: req.Name})
}

// GET /v1/locks?prefix=jobs/[&limit=N&after=NAME]: the names the caller
// may read, one page; X-Next-After names the next.
func (s *Server) listLocks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := queryPage(q)
	var locks []lockstate.LockInfo
	var next string
	if err == nil {
		locks, next, err = s.locks.Locks(r.Context(), consistency(r), q.Get("prefix"), page)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]wire.Lock, len(locks))
	for i, li := range locks {
		out[i] = lockJSON(li, s.locks.Since)
	}
	setNextAfter(w, next)
	s.setTableTime(w)
	writeJSON(w, http.StatusOK, out)
}

// lockQuery reads the query of a read of one name, GET /v1/locks/{name...}
// or GET /v1/elections/{name...}: with index, a blocking query, which
// takes one of the node's waits until release is called.
func (s *Server) lockQuery(w http.ResponseWriter, r *http.Request) (query lockservice.LockQuery, release func(), err error) {
	q := r.URL.Query()
	query = lockservice.LockQuery{Name: r.PathValue("name"), Block: q.Has("index")}
	if query.Index, err = queryUint(q, "index"); err != nil {
		return query, nil, err
	}
	if query.Wait, err = queryDuration(q, "wait"); err != nil {
		return query, nil, err
	}
	release = func() {}
	if query.Block {
		var refused *Error
		if release, refused = s.waitSlot(w); refused != nil {
			return query, nil, refused
		}
	}
	return query, release, nil
}

// GET /v1/locks/{name...}[?index=V&wait=30s]
//
// A blocking query: with index, it answers once the name's version is
// above V, or when the wait (default and cap MaxWait) runs out, with the
// state then. X-Lock-Index carries the version either way; a name nobody
// holds, waits for or delays answers 404 lock_not_found with the header.
func (s *Server) getLock(w http.ResponseWriter, r *http.Request) {
	query, release, err := s.lockQuery(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	view, err := s.locks.Lock(r.Context(), consistency(r), query)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("X-Lock-Index", strconv.FormatUint(view.Version, 10))
	if !view.Found {
		s.writeError(w, r, errorf(wire.CodeLockNotFound, "lock %q is not held, waited for or delayed", query.Name))
		return
	}
	s.setTableTime(w)
	writeJSON(w, http.StatusOK, lockJSON(view.Lock, s.locks.Since))
}

// GET /v1/elections/{name...}[?index=V&wait=30s][&stale]
//
// The name as an election: its leader (value, token, since) and how many
// candidates queue; blocking as GET /v1/locks/{name...}, with the same
// X-Lock-Index. Never 404: a name nobody holds has no leader (null), and
// an observer blocks on it until it has one.
func (s *Server) getElection(w http.ResponseWriter, r *http.Request) {
	query, release, err := s.lockQuery(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	e, err := s.locks.Election(r.Context(), consistency(r), query)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("X-Lock-Index", strconv.FormatUint(e.Version, 10))
	s.setTableTime(w)
	writeJSON(w, http.StatusOK, electionJSON(e, s.locks.Since))
}

// POST /v1/proclaim
func (s *Server) proclaim(w http.ResponseWriter, r *http.Request) {
	var req wire.ProclaimRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	err := checkLockName(req.Name)
	var p *lockstate.Proclamation
	if err == nil {
		p, err = s.locks.Proclaim(r.Context(), string(req.Session), &lockstate.Proclaim{Name: req.Name, Value: req.Value, Token: req.Token})
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ProclaimResponse{Name: p.Name, Token: p.Token, Value: p.Value, Version: p.Version})
}

// GET /v1/check?name=N&token=T
func (s *Server) check(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var token uint64
	var err error
	if !q.Has("token") {
		err = invalid("the token query parameter is required")
	} else if err = checkLockName(q.Get("name")); err == nil {
		token, err = queryUint(q, "token")
	}
	var out wire.CheckResponse
	if err == nil {
		out.Valid, out.Token, err = s.locks.Check(r.Context(), consistency(r), q.Get("name"), token)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
