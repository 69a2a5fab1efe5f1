package checker

import (
	"github.com/lockd/lockd/jepsen/history"
)

// HadIntruder reports whether the history holds intruder attempts (a run
// with ACLs on).
func HadIntruder(events []history.Event) bool {
	for _, e := range events {
		if e.Process == history.Intruder {
			return true
		}
	}
	return false
}

// Ownership checks the intruder's attempts (workload/intruder.go): with a
// token of its own it tried to act through other clients' sessions, and
// every attempt must have been refused as forbidden (or found the session
// gone). An attempt the cluster accepted is a violation: an operation made
// with one token changed another's session. So is any other refusal,
// which means the request got past the ownership check to be refused for
// something else. Attempts with an unknown outcome are counted.
func Ownership(events []history.Event, cfg Config) Result {
	r := newResult("ownership")
	for _, e := range events {
		if e.Process != history.Intruder || e.F != history.Intrude || e.Type == history.Invoke {
			continue
		}
		what := ""
		if len(e.Names) > 0 {
			what = e.Names[0]
		}
		switch {
		case e.Type == history.OK:
			r.anomaly(cfg, "event %d: the intruder's %s through session %s, another token's, was accepted", e.Index, what, e.Session)
		case e.Type == history.Info:
			r.Counts["unknown"]++
		case e.Error == "forbidden":
			r.Counts["forbidden"]++
		case e.Error == "session_not_found":
			r.Counts["session_gone"]++
		default:
			r.anomaly(cfg, "event %d: the intruder's %s through session %s got past the ownership check (refused as %s)",
				e.Index, what, e.Session, e.Error)
		}
	}
	if cfg.Intruder && r.Counts["forbidden"] == 0 && r.Verdict == Valid {
		r.Verdict = Unknown
		r.Note = "the intruder made no attempt that was refused as forbidden: the check proved nothing"
	}
	return r
}
