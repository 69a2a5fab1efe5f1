package checker

import (
	"fmt"
	"maps"
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
	start, found := finalPhaseStart(events)
	if !found {
		r.Verdict = Unknown
		r.Note = "no final phase"
		return r
	}
	procs, order := finalAcquires(all, start, bound, deadlock, cfg, &r)
	unservedClients(events, procs, order, bound, cfg, &r)
	if len(order) == 0 {
		r.Verdict = Unknown
		r.Note = "no acquire in the final phase"
	}
	return r
}

// finalPhaseStart returns the time of the harness's "final" phase event.
func finalPhaseStart(events []history.Event) (time.Duration, bool) {
	for _, e := range events {
		if e.Process == history.Harness && e.F == history.Phase && e.Fault == "final" {
			return e.Time, true
		}
	}
	return 0, false
}

// finalProcess is a process that invoked an acquire in the final phase.
type finalProcess struct {
	worker int
	served bool // one acquire ok within the bound
}

// finalAcquires judges the acquires invoked in the final phase and
// returns their processes, and the processes in order of first acquire.
func finalAcquires(all []op, start, bound time.Duration, deadlock bool, cfg Config, r *Result) (map[int]*finalProcess, []int) {
	procs := map[int]*finalProcess{}
	var order []int
	for _, o := range all {
		if o.inv.F != history.Acquire || o.inv.Time < start {
			continue
		}
		r.Counts["final-acquires"]++
		p := procs[o.inv.Process]
		if p == nil {
			p = &finalProcess{worker: o.inv.Worker}
			procs[o.inv.Process] = p
			order = append(order, o.inv.Process)
		}
		if judgeFinalAcquire(o, bound, deadlock, cfg, r) {
			p.served = true
		}
	}
	r.Counts["final-processes"] = len(order)
	return procs, order
}

// judgeFinalAcquire counts and judges one final-phase acquire; it
// reports whether the acquire served its process (ok within bound).
func judgeFinalAcquire(o op, bound time.Duration, deadlock bool, cfg Config, r *Result) bool {
	took := time.Duration(-1)
	if o.comp != nil && o.comp.Type != history.Info {
		took = o.comp.Time - o.inv.Time
	}
	switch t := o.typ(); {
	case t == history.OK:
		r.Counts["final-ok"]++
		if deadlock && took > bound {
			r.anomaly(cfg, "acquire invoked at event %d (process %d) took %v (bound %v)", o.inv.Index, o.inv.Process, took, bound)
		}
		return took <= bound
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
	return false
}

// unservedClients flags every client (worker) of the run that no
// final-phase acquire served, whichever process it runs by then.
func unservedClients(events []history.Event, procs map[int]*finalProcess, order []int, bound time.Duration, cfg Config, r *Result) {
	workers := map[int]bool{}
	for _, e := range events {
		if e.Process >= 0 {
			workers[e.Worker] = true
		}
	}
	served := map[int]bool{}
	for _, id := range order {
		if procs[id].served {
			served[procs[id].worker] = true
		}
	}
	ws := slices.Sorted(maps.Keys(workers))
	r.Counts["clients"] = len(ws)
	for _, w := range ws {
		if !served[w] {
			r.anomaly(cfg, "client %d got no acquire within %v after the final heal", w, bound)
		}
	}
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
	waits := timedOutWaits(events, all)
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

// timeWindow is a span of run time.
type timeWindow struct{ from, to time.Duration }

func (w timeWindow) overlapsAny(ws []timeWindow) bool {
	for _, f := range ws {
		if w.from < f.to && f.from < w.to {
			return true
		}
	}
	return false
}

// faultWindows returns each fault's window, from when it began (its
// start's Began) to faultGrace after its stop (a fault never stopped
// lasts forever).
func faultWindows(events []history.Event) []timeWindow {
	var faults []timeWindow
	open := map[string]time.Duration{}
	for _, e := range events {
		if e.Process != history.Nemesis {
			continue
		}
		key := e.Fault + fmt.Sprint(e.Targets)
		switch e.F {
		case history.Start:
			open[key] = e.Began()
		case history.Stop:
			if t, ok := open[key]; ok {
				faults = append(faults, timeWindow{t, e.Time + faultGrace})
				delete(open, key)
			}
		}
	}
	for _, t := range open {
		faults = append(faults, timeWindow{t, time.Duration(1<<63 - 1)})
	}
	return faults
}

// wait is a single-lock acquire that timed out while its process held
// other names.
type wait struct {
	timeWindow
	proc int
	want string
	held []string
	idx  int // history index of the invoke
}

// timedOutWaits returns the waits of live sessions that ended "timeout"
// outside every fault window, with what their process held meanwhile.
func timedOutWaits(events []history.Event, all []op) []wait {
	faults := faultWindows(events)
	lost := LostProcesses(events)
	holding := map[int][]string{}
	var waits []wait
	for _, o := range all {
		p := o.inv.Process
		switch {
		case o.inv.F == history.Acquire && o.typ() == history.Fail && o.errString() == "timeout" && len(o.inv.Locks) == 1 && !lost[p]:
			w := wait{timeWindow: timeWindow{o.inv.Time, o.comp.Time}, proc: p, want: o.inv.Locks[0].Name,
				held: append([]string(nil), holding[p]...), idx: o.inv.Index}
			if len(w.held) > 0 && !w.overlapsAny(faults) {
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
	return waits
}
