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

// Ownership checks that no operation made with one token changed a
// session of another. The intruder (workload/intruder.go) tried, with a
// token of its own, to act through the workers' sessions; two checks:
//
//  1. every attempt was refused as forbidden, or found the session or
//     request "not found" (404: nothing to change; lockd answers another
//     token's session or request as if it did not exist, so that ids
//     cannot be probed). An accepted attempt is a violation; so is any
//     other refusal, which means the request got past the ownership
//     check to be refused for something else. Attempts with an unknown
//     outcome are counted.
//  2. no worker lost its session, or had an acquire cancelled, with no
//     fault and no operation of its own to explain it, after an intruder
//     attempt through that session: whatever that attempt was answered,
//     it changed the session (see unexplainedLosses).
//
// A run whose intruder was never refused for ownership proved nothing:
// unknown. A refusal counts as one when it said forbidden, or said
// session_not_found while the session lived on (its worker completed an
// operation through it afterwards: "refused_alive").
func Ownership(events []history.Event, cfg Config) Result {
	r := newResult("ownership")
	attempts := intrusions(events)
	lastOK := workerLastOK(events)
	for _, a := range attempts {
		judgeIntrusion(a, cfg, &r)
		if a.comp != nil && a.comp.Type == history.Fail && a.comp.Error == "session_not_found" &&
			lastOK[a.inv.Session] > a.comp.Index {
			r.Counts["refused_alive"]++
		}
	}
	unexplainedLosses(events, attempts, cfg, &r)
	if cfg.Intruder && r.Counts["forbidden"]+r.Counts["refused_alive"] == 0 && r.Verdict == Valid {
		r.Verdict = Unknown
		r.Note = "the intruder made no attempt refused for ownership (forbidden, or not found while the session lived): the check proved nothing"
	}
	return r
}

// workerLastOK returns, by session, the index of the last operation a
// worker completed through it.
func workerLastOK(events []history.Event) map[string]int {
	out := map[string]int{}
	for _, e := range events {
		if e.Type == history.OK && e.Session != "" && e.Process != history.Intruder && e.Process != history.Nemesis {
			out[e.Session] = max(out[e.Session], e.Index)
		}
	}
	return out
}

// intrusion is one intruder attempt: its invoke and completion (nil:
// none, unknown).
type intrusion struct {
	inv  history.Event
	comp *history.Event
}

func (a intrusion) what() string {
	if len(a.inv.Names) == 0 {
		return "attempt"
	}
	return a.inv.Names[0]
}

func (a intrusion) typ() history.Type {
	if a.comp == nil {
		return history.Info
	}
	return a.comp.Type
}

// intrusions pairs the intruder's invokes with their completions (it
// runs one attempt at a time).
func intrusions(events []history.Event) []intrusion {
	var out []intrusion
	open := -1
	for _, e := range events {
		if e.Process != history.Intruder || e.F != history.Intrude {
			continue
		}
		if e.Type == history.Invoke {
			open = len(out)
			out = append(out, intrusion{inv: e})
			continue
		}
		if open >= 0 {
			c := e
			out[open].comp = &c
			open = -1
		}
	}
	return out
}

// refusedUnchanged are the refusals after which the attempt certainly
// changed nothing: the ownership check, or nothing there to change.
var refusedUnchanged = map[string]string{
	"forbidden":         "forbidden",
	"session_not_found": "session_gone",
	"request_not_found": "request_gone",
}

// judgeIntrusion is check 1 for one attempt.
func judgeIntrusion(a intrusion, cfg Config, r *Result) {
	r.Counts["attempts"]++
	switch a.typ() {
	case history.OK:
		r.Counts["accepted"]++
		r.anomaly(cfg, "event %d: the intruder's %s through session %s, another token's, was accepted",
			a.comp.Index, a.what(), a.inv.Session)
	case history.Info:
		r.Counts["unknown"]++
	default:
		if k, ok := refusedUnchanged[a.comp.Error]; ok {
			r.Counts[k]++
			return
		}
		r.anomaly(cfg, "event %d: the intruder's %s through session %s got past the ownership check (refused as %s)",
			a.comp.Index, a.what(), a.inv.Session, a.comp.Error)
	}
}
