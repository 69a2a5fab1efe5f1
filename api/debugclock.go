package api

import (
	"net/http"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// GET and PUT /v1/debug/clock: the clock hook of the jepsen clock nemesis
// (lockd --test-clock-hook), registered only when Config.ClockOffset is
// set. The offset is added to every reading of this node's wall clock
// (raftnode.Config.ClockOffset), never to a duration. Operators only:
// it is a fault injector.

// maxClockOffset bounds the offset: a year is more than any clock steps,
// and keeps now+offset far from overflowing.
const maxClockOffset = 366 * 24 * time.Hour

// clockOffset is the body of PUT /v1/debug/clock and the answer of both.
type clockOffset struct {
	Offset wire.Duration `json:"offset"`
	Wall   time.Time     `json:"wall,omitzero"` // the node's wall clock with the offset (answers only)
}

func (s *Server) getClock(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.clockNow())
}

func (s *Server) setClock(w http.ResponseWriter, r *http.Request) {
	var body clockOffset
	if err := s.decode(w, r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !body.Wall.IsZero() {
		s.writeError(w, r, invalid("wall is read-only: set offset"))
		return
	}
	if off := time.Duration(body.Offset); off > maxClockOffset || off < -maxClockOffset {
		s.writeError(w, r, invalid("offset %v is beyond ±%v", off, maxClockOffset))
		return
	}
	s.cfg.ClockOffset.Store(int64(body.Offset))
	s.log.Warn("TEST HOOK: wall clock offset set", "offset", time.Duration(body.Offset))
	writeJSON(w, http.StatusOK, s.clockNow())
}

func (s *Server) clockNow() clockOffset {
	off := time.Duration(s.cfg.ClockOffset.Load())
	return clockOffset{Offset: wire.Duration(off), Wall: time.Now().Add(off).UTC()}
}

// clockRoutes adds the clock hook's routes when it is on.
func (s *Server) clockRoutes(mux *http.ServeMux) {
	if s.cfg.ClockOffset == nil {
		return
	}
	mux.HandleFunc("GET /v1/debug/clock", s.operator(s.getClock))
	mux.HandleFunc("PUT /v1/debug/clock", s.operator(s.setClock))
}
