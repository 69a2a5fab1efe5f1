package api

import (
	"fmt"
	"net/http"
	"time"
)

// eventsCoalesce is the shortest gap between two events on one stream: a
// busy node applies thousands of entries a second, a dashboard needs a
// few refreshes.
const eventsCoalesce = 200 * time.Millisecond

// events is GET /v1/events: a server-sent event stream carrying this node's
// applied index whenever its table changes (coalesced), so the dashboard
// refreshes on change instead of polling. A comment line every 15 s keeps
// proxies from closing an idle stream. A stream ends after
// Config.MaxStreamDuration (the browser's EventSource reconnects), and a
// node serves at most Config.MaxStreams at once.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if !s.streams.take() {
		s.limits.refusals.WithLabelValues("streams").Inc()
		s.writeError(w, r, tooMany("event streams", s.streams.max, "--max-streams"))
		return
	}
	defer s.streams.put()
	if err := s.locks.Authorized(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	end := time.NewTimer(s.cfg.MaxStreamDuration)
	defer end.Stop()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives any per-request write timeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	sent := false
	var last uint64
	for {
		changed := s.locks.Changed() // before reading the index: no change slips between
		if idx := s.locks.AppliedIndex(); !sent || idx != last {
			sent, last = true, idx
			if _, err := fmt.Fprintf(w, "data: %d\n\n", idx); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
			select {
			case <-time.After(eventsCoalesce):
				continue
			case <-r.Context().Done():
				return
			case <-s.locks.Closing():
				return
			case <-end.C:
				return
			}
		}
		select {
		case <-changed:
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.locks.Closing():
			return
		case <-end.C:
			return
		}
	}
}
