package checker

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Liveness checks the final, healed phase (from the harness's "phase"
// "final" event): no acquire fails with "timeout", and every process that
// invoked an acquire there — and every client of the run, whichever
// process it runs by then — gets one acquire ok within cfg.LivenessBound
// of its invoke. For the deadlock workload every acquire of the final
// phase must instead complete, ok or failed "deadlock", within the bound;
// deadlock failures are counted as "deadlocks-resolved" (over the whole
// run), and two acquires that timed out while each process held what the
// other wanted — a wait-for cycle nobody broke — are a violation
// anywhere in the run outside fault windows. Without a final phase the
// verdict is Unknown.
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
	if deadlock {
		unresolvedDeadlocks(events, all, cfg, &r)
	}
	if !found {
		r.Verdict = Unknown
		r.Note = "no final phase"
		return r
	}
	type proc struct {
		first  int // history index of the first final-phase acquire
		worker int
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
			p = &proc{first: o.inv.Index, worker: o.inv.Worker}
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
	// Every client (worker) of the run must be served after the heal,
	// whichever process it runs by then.
	workers := map[int]bool{}
	served := map[int]bool{}
	for _, e := range events {
		if e.Process >= 0 {
			workers[e.Worker] = workers[e.Worker] || false
		}
	}
	for _, id := range order {
		if procs[id].served {
			served[procs[id].worker] = true
		}
	}
	ws := make([]int, 0, len(workers))
	for w := range workers {
		ws = append(ws, w)
	}
	slices.Sort(ws)
	r.Counts["clients"] = len(ws)
	for _, w := range ws {
		if !served[w] {
			r.anomaly(cfg, "client %d got no acquire within %v after the final heal", w, bound)
		}
	}
	if len(order) == 0 {
		r.Verdict = Unknown
		r.Note = "no acquire in the final phase"
	}
	return r
}

// faultGrace extends each fault window: a node that comes back needs a
// moment (election, catch-up) before the cluster answers promptly.
const faultGrace = 5 * time.Second

// unresolvedDeadlocks flags pairs of acquires that both ended "timeout"
// while each process held the name the other waited for, their waits
// overlapped, both sessions stayed live, and no fault was under way: a
// definite timeout means the request was in the table, so the cycle was
// there for lockd's detector to see.
func unresolvedDeadlocks(events []history.Event, all []op, cfg Config, r *Result) {
	type window struct{ from, to time.Duration }
	var faults []window
	open := map[string]time.Duration{}
	for _, e := range events {
		if e.Process != history.Nemesis {
			continue
		}
		key := e.Fault + fmt.Sprint(e.Targets)
		switch e.F {
		case history.Start:
			open[key] = e.Time
		case history.Stop:
			if t, ok := open[key]; ok {
				faults = append(faults, window{t, e.Time + faultGrace})
				delete(open, key)
			}
		}
	}
	for _, t := range open {
		faults = append(faults, window{t, time.Duration(1<<63 - 1)})
	}
	duringFault := func(w window) bool {
		for _, f := range faults {
			if w.from < f.to && f.from < w.to {
				return true
			}
		}
		return false
	}
	lost := lostProcesses(events)
	type wait struct {
		window
		proc int
		want string
		held []string
		idx  int
	}
	holding := map[int][]string{}
	var waits []wait
	for _, o := range all {
		p := o.inv.Process
		switch {
		case o.inv.F == history.Acquire && o.typ() == history.Fail && o.errString() == "timeout" && len(o.inv.Locks) == 1 && !lost[p]:
			w := wait{window: window{o.inv.Time, o.comp.Time}, proc: p, want: o.inv.Locks[0].Name,
				held: append([]string(nil), holding[p]...), idx: o.inv.Index}
			if len(w.held) > 0 && !duringFault(w.window) {
				waits = append(waits, w)
			}
		case o.inv.F == history.Acquire && o.typ() == history.OK:
			for _, g := range o.comp.Granted {
				holding[p] = append(holding[p], g.Name)
			}
		case o.inv.F == history.Release:
			holding[p] = slices.DeleteFunc(holding[p], func(n string) bool { return slices.Contains(o.inv.Names, n) })
		case o.inv.F == history.Close:
			delete(holding, p)
		}
	}
	for i, a := range waits {
		for _, b := range waits[i+1:] {
			if a.proc != b.proc && a.from < b.to && b.from < a.to &&
				slices.Contains(b.held, a.want) && slices.Contains(a.held, b.want) {
				r.Counts["deadlocks-unresolved"]++
				r.anomaly(cfg, "unresolved deadlock: process %d (holding %v, waiting for %q, event %d) and process %d (holding %v, waiting for %q, event %d) both timed out",
					a.proc, a.held, a.want, a.idx, b.proc, b.held, b.want, b.idx)
			}
		}
	}
}
