package checker

import (
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Liveness checks the final, healed phase (from the harness's "phase"
// "final" event): no acquire fails with "timeout", and every process that
// invoked an acquire there gets one acquire ok within cfg.LivenessBound
// of its invoke. For the deadlock workload every acquire of the final
// phase must instead complete, ok or failed "deadlock", within the bound;
// deadlock failures are counted as "deadlocks-resolved" (over the whole
// run). Without a final phase the verdict is Unknown.
func Liveness(events []history.Event, cfg Config) Result {
	r := newResult("liveness")
	bound := cfg.LivenessBound
	if bound <= 0 {
		bound = 30 * time.Second
	}
	start, found := time.Duration(0), false
	for _, e := range events {
		if e.Process == history.Harness && e.F == history.Phase && e.Fault == "final" {
			start, found = e.Time, true
			break
		}
	}
	deadlock := cfg.Workload == "deadlock"
	all := ops(events)
	for _, o := range all {
		if o.inv.F == history.Acquire && o.typ() == history.Fail && o.errString() == "deadlock" {
			r.Counts["deadlocks-resolved"]++
		}
	}
	if !found {
		r.Verdict = Unknown
		r.Note = "no final phase"
		return r
	}
	type proc struct {
		first  int // history index of the first final-phase acquire
		served bool
	}
	procs := map[int]*proc{}
	var order []int
	for _, o := range all {
		if o.inv.F != history.Acquire || o.inv.Time < start {
			continue
		}
		r.Counts["final-acquires"]++
		p := procs[o.inv.Process]
		if p == nil {
			p = &proc{first: o.inv.Index}
			procs[o.inv.Process] = p
			order = append(order, o.inv.Process)
		}
		took := time.Duration(-1)
		if o.comp != nil && o.comp.Type != history.Info {
			took = o.comp.Time - o.inv.Time
		}
		switch t := o.typ(); {
		case t == history.OK:
			r.Counts["final-ok"]++
			if took <= bound {
				p.served = true
			}
			if deadlock && took > bound {
				r.anomaly(cfg, "acquire invoked at event %d (process %d) took %v (bound %v)", o.inv.Index, o.inv.Process, took, bound)
			}
		case t == history.Fail && o.errString() == "timeout":
			r.Counts["final-timeouts"]++
			r.anomaly(cfg, "acquire invoked at event %d (process %d) timed out in the final phase", o.inv.Index, o.inv.Process)
		case t == history.Fail && o.errString() == "deadlock":
			if deadlock && took > bound {
				r.anomaly(cfg, "acquire invoked at event %d (process %d) took %v (bound %v)", o.inv.Index, o.inv.Process, took, bound)
			}
		case t == history.Fail:
			r.Counts["final-failed-other"]++
			if deadlock {
				r.anomaly(cfg, "acquire invoked at event %d (process %d) failed %q in the final phase", o.inv.Index, o.inv.Process, o.errString())
			}
		default:
			r.Counts["final-incomplete"]++
			if deadlock {
				r.anomaly(cfg, "acquire invoked at event %d (process %d) never completed", o.inv.Index, o.inv.Process)
			}
		}
	}
	r.Counts["final-processes"] = len(order)
	if !deadlock {
		for _, id := range order {
			if !procs[id].served {
				r.anomaly(cfg, "process %d (first final-phase acquire at event %d) got no acquire within %v", id, procs[id].first, bound)
			}
		}
	}
	if len(order) == 0 {
		r.Verdict = Unknown
		r.Note = "no acquire in the final phase"
	}
	return r
}
