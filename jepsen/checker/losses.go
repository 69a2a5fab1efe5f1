package checker

import (
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Check 2 of Ownership: a session changed by another token shows in its
// owner's history as a loss nothing else explains — the session found
// gone (lost) after an intruder's close or keepalive trouble, a hold
// released or surrendered under it (its release then fails not_held and
// the session is recorded lost), an acquire ended "cancelled" (workers
// never cancel a request whose wait is still running: the client only
// cancels when its own deadline passed, which it records as unknown).
//
// A loss is explained by its own process's close, or by a fault — any
// nemesis fault, client pauses included, whose window (plus faultGrace)
// overlaps the time from TTL+faultGrace before the process's last proof
// that its session was alive (or before loss−TTL, whichever is earlier:
// a client declares its session lost one TTL after its last successful
// keepalive) up to the loss. An unexplained loss after an intruder
// attempt through that session, within the process's life, is a
// violation whatever the attempt was answered: accepted, unknown, or
// refused (then the refusal did not hold). Unexplained losses without
// any attempt are counted, not judged: that is not this check's claim.

// defaultSessionTTL is the suite's default --ttl.
const defaultSessionTTL = 10 * time.Second

func (c Config) sessionTTL() time.Duration {
	if c.SessionTTL <= 0 {
		return defaultSessionTTL
	}
	return c.SessionTTL
}

// loss is one event where a worker learned its session or request gone.
type loss struct {
	ev    history.Event
	start int           // index of the process's first event
	from  time.Duration // the earliest time a cause may lie
}

// workerLosses returns the losses that the process's own close does not
// explain, each with the window in which a fault must lie to explain it.
func workerLosses(events []history.Event, ttl time.Duration) []loss {
	first := map[int]history.Event{}
	proof := map[int]time.Duration{}
	closing := map[int]bool{}
	var out []loss
	for _, e := range events {
		if e.Process < 0 {
			continue
		}
		if _, ok := first[e.Process]; !ok {
			first[e.Process] = e
		}
		switch {
		case e.F == history.Close && e.Type == history.Invoke:
			closing[e.Process] = true
		case e.F == history.Lost || e.F == history.Acquire && e.Type == history.Fail && e.Error == "cancelled":
			if closing[e.Process] {
				continue
			}
			last, ok := proof[e.Process]
			if !ok {
				last = first[e.Process].Time
			}
			from := min(last, e.Time-ttl) - ttl - faultGrace
			out = append(out, loss{ev: e, start: first[e.Process].Index, from: from})
		case provesAlive(e):
			proof[e.Process] = e.Time
		}
	}
	return out
}

// unexplainedLosses is check 2 (see above).
func unexplainedLosses(events []history.Event, attempts []intrusion, cfg Config, r *Result) {
	faults := faultWindows(events)
	bySession := map[string][]intrusion{}
	for _, a := range attempts {
		bySession[a.inv.Session] = append(bySession[a.inv.Session], a)
	}
	for _, l := range workerLosses(events, cfg.sessionTTL()) {
		r.Counts["losses"]++
		if (timeWindow{l.from, l.ev.Time + 1}).overlapsAny(faults) {
			continue
		}
		r.Counts["losses_unexplained"]++
		a, ok := suspect(bySession[l.ev.Session], l)
		if !ok {
			continue
		}
		r.Counts["losses_after_intrusion"]++
		verb := "was accepted"
		switch a.typ() {
		case history.Info:
			verb = "had an unknown outcome"
		case history.Fail:
			verb = "was refused as " + a.comp.Error + ", but did not hold"
		}
		r.anomaly(cfg, "event %d: process %d's %s of session %s, with no fault or close of its own to explain it, after the intruder's %s through that session (event %d) %s",
			l.ev.Index, l.ev.Process, lossWhat(l.ev), l.ev.Session, a.what(), a.inv.Index, verb)
	}
}

// suspect picks, among the attempts through the lost session during its
// process's life, the likeliest cause: the last accepted one, else the
// last of unknown outcome, else the last refused.
func suspect(as []intrusion, l loss) (intrusion, bool) {
	var best intrusion
	rank := 0
	for _, a := range as {
		if a.inv.Index < l.start || a.inv.Index > l.ev.Index {
			continue
		}
		k := map[history.Type]int{history.OK: 3, history.Info: 2}[a.typ()]
		if k == 0 {
			k = 1
		}
		if k >= rank {
			best, rank = a, k
		}
	}
	return best, rank > 0
}

func lossWhat(e history.Event) string {
	if e.F == history.Acquire {
		return "acquire ended cancelled"
	}
	return "loss"
}
