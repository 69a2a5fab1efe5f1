package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// PUT /v1/locks/{name...}?session=ID&mode=write&wait=30s[&weight=&limit=&hold_ttl=&request_id=]
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
	req := AcquireRequest{Session: sess, RequestID: q.Get("request_id"),
		Locks: []LockSpec{{Name: r.PathValue("name"), Mode: Mode(mode)}}}
	for _, p := range []struct {
		key string
		dst *Duration
	}{{"wait", &req.Wait}, {"hold_ttl", &req.HoldTTL}} {
		d, err := queryDuration(q, p.key)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		*p.dst = Duration(d)
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
	cmd, err := acquireCmd(req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.acquire(w, r, cmd)
}

// DELETE /v1/locks/{name...}?session=ID
func (s *Server) releaseOne(w http.ResponseWriter, r *http.Request) {
	sess, err := querySession(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.doRelease(w, r, ReleaseRequest{Session: sess, Name: r.PathValue("name")})
}

// POST /v1/release
func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	var req ReleaseRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.doRelease(w, r, req)
}

func (s *Server) doRelease(w http.ResponseWriter, r *http.Request, req ReleaseRequest) {
	err := validSession(req.Session)
	switch {
	case err != nil:
	case req.Name != "" && req.RequestID != "":
		err = invalid("release names a lock or a request_id, not both")
	case req.Name != "":
		err = validName(req.Name)
	case req.RequestID == "":
		err = invalid("release needs a name or a request_id")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Not retried on an unknown outcome: a release counts a hold down, and
	// a second one would release a reentrant hold once too often.
	res, _, err := s.propose(r.Context(), &lockstate.Release{Session: lockstate.SessionID(req.Session),
		Name: req.Name, RequestID: req.RequestID}, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := ReleaseResponse{Released: make([]ReleasedLock, len(res.Released))}
	for i, name := range res.Released {
		out.Released[i] = ReleasedLock{Name: name}
	}
	writeJSON(w, http.StatusOK, out)
}

// POST /v1/surrender
func (s *Server) surrender(w http.ResponseWriter, r *http.Request) {
	var req SurrenderRequest
	err := s.decode(w, r, &req, false)
	if err == nil {
		err = validSession(req.Session)
	}
	if err == nil {
		err = validName(req.Name)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, _, err := s.propose(r.Context(), &lockstate.Surrender{Session: lockstate.SessionID(req.Session), Name: req.Name}, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := "surrendered"
	if res.Kept {
		status = "kept"
	}
	writeJSON(w, http.StatusOK, SurrenderResponse{Status: status, Name: req.Name})
}

// GET /v1/locks?prefix=jobs/
func (s *Server) listLocks(w http.ResponseWriter, r *http.Request) {
	if err := s.readIndex(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var out []Lock
	s.fsm.Read(func(t *lockstate.Table) {
		ls := t.Locks(r.URL.Query().Get("prefix"))
		out = make([]Lock, len(ls))
		for i, li := range ls {
			out[i] = lockJSON(li)
		}
	})
	writeJSON(w, http.StatusOK, out)
}

// GET /v1/locks/{name...}[?index=V&wait=30s]
//
// A blocking query: with index, it answers once the name's version is
// above V, or when the wait (default and cap MaxWait) runs out, with the
// state then. X-Lock-Index carries the version either way; a name nobody
// holds, waits for or delays answers 404 lock_not_found with the header.
func (s *Server) getLock(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	q := r.URL.Query()
	err := validName(name)
	var index uint64
	var wait time.Duration
	if err == nil {
		index, err = queryUint(q, "index")
	}
	if err == nil {
		wait, err = queryDuration(q, "wait")
	}
	if err == nil {
		err = s.readIndex(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if q.Has("index") {
		if wait == 0 {
			wait = s.cfg.MaxWait
		}
		s.awaitChange(r.Context(), time.Now().Add(s.capWait(wait)), func(t *lockstate.Table) bool {
			return t.Version(name) > index
		})
	}
	var li lockstate.LockInfo
	var ok bool
	var version uint64
	s.fsm.Read(func(t *lockstate.Table) {
		li, ok = t.Lock(name)
		version = t.Version(name)
	})
	w.Header().Set("X-Lock-Index", strconv.FormatUint(version, 10))
	if !ok {
		s.writeError(w, r, errorf(http.StatusNotFound, string(lockstate.CodeNoLock), "lock %q is not held, waited for or delayed", name))
		return
	}
	writeJSON(w, http.StatusOK, lockJSON(li))
}

// GET /v1/check?name=N&token=T
func (s *Server) check(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("name")
	err := validName(name)
	var token uint64
	if err == nil {
		if !q.Has("token") {
			err = invalid("the token query parameter is required")
		} else {
			token, err = queryUint(q, "token")
		}
	}
	if err == nil {
		err = s.readIndex(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var out CheckResponse
	s.fsm.Read(func(t *lockstate.Table) { out.Valid, out.Token = t.Check(name, token) })
	writeJSON(w, http.StatusOK, out)
}
