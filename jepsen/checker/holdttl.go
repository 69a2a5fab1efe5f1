package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Holds granted with a hold TTL end by themselves, at the earliest their
// acquire's invoke plus the TTL (lockd's table time never runs ahead of
// real time), whatever the client saw: a grant it never heard of (an
// acquire of unknown outcome), one whose release came too late. The
// model gets, for each such grant, an operation that ends it from that
// deadline until it stops mattering — the grant's release completed, its
// session was closed or lost, or the history ended.

// kindHoldsExpired is the operation that ends a process's holds of some
// names by their hold TTL (LockInput.Kind).
const kindHoldsExpired = "holds-expired"

// ttlGrant is one grant (maybe) made with a hold TTL.
type ttlGrant struct {
	proc            int
	index           int // history index of the acquire's invoke
	names           []string
	deadline, until time.Duration
}

// ttlGrants returns the grants made with a hold TTL, acknowledged or of
// unknown outcome, with the window in which their TTL may end them.
func ttlGrants(events []history.Event, s sessionLiveness) []ttlGrant {
	var out []ttlGrant
	open := map[int][]int{} // process -> indexes in out of grants not yet settled
	settle := func(proc int, at time.Duration, match func(g ttlGrant) bool) {
		keep := open[proc][:0]
		for _, i := range open[proc] {
			if match(out[i]) {
				out[i].until = at
			} else {
				keep = append(keep, i)
			}
		}
		open[proc] = keep
	}
	invoked := map[int]history.Event{}
	for _, e := range events {
		if e.Process < 0 {
			continue
		}
		switch {
		case e.Type == history.Invoke:
			invoked[e.Process] = e
		case e.F == history.Acquire && e.Type != history.Fail && invoked[e.Process].HoldTTL > 0:
			inv := invoked[e.Process]
			g := ttlGrant{proc: e.Process, index: inv.Index, deadline: inv.Time + inv.HoldTTL, until: s.end}
			for _, l := range inv.Locks {
				g.names = append(g.names, l.Name)
			}
			for _, gr := range e.Granted {
				if !slices.Contains(g.names, gr.Name) {
					g.names = append(g.names, gr.Name)
				}
			}
			out = append(out, g)
			open[e.Process] = append(open[e.Process], len(out)-1)
		case e.F == history.Release && e.Type != history.Info:
			names := invoked[e.Process].Names
			settle(e.Process, e.Time, func(g ttlGrant) bool {
				return slices.ContainsFunc(names, func(n string) bool { return slices.Contains(g.names, n) })
			})
		case e.F == history.Lost:
			settle(e.Process, e.Time, func(ttlGrant) bool { return true })
		}
	}
	for proc, closed := range s.closedAt {
		settle(proc, closed-1, func(g ttlGrant) bool { return g.until > closed-1 })
	}
	return out
}

// addHoldExpiries adds the operation that ends each TTL grant between its
// deadline and when it stops mattering.
func (b *lockOpsBuilder) addHoldExpiries(events []history.Event) {
	for _, g := range ttlGrants(events, b.sessions) {
		if g.deadline >= g.until || len(g.names) == 0 {
			continue
		}
		part := b.partitions.of(g.names[0])
		b.pending = append(b.pending, pendingOp{
			in:  LockInput{Kind: kindHoldsExpired, Process: g.proc, Part: part, Names: g.names, Index: g.index},
			out: LockOutput{Type: history.Info}, call: g.deadline, ret: g.until, client: -1,
		})
	}
}

// releaseDeadlines maps the invoke index of each release whose names are
// all held with a hold TTL to the earliest of their deadlines.
func releaseDeadlines(events []history.Event) map[int]time.Duration {
	out := map[int]time.Duration{}
	held := map[int]map[string]time.Duration{} // process -> name -> deadline
	invoked := map[int]time.Duration{}
	for _, e := range events {
		if e.Process < 0 {
			continue
		}
		switch {
		case e.Type == history.Invoke && e.F == history.Acquire:
			invoked[e.Process] = e.Time
		case e.Type == history.OK && e.F == history.Acquire && e.HoldTTL > 0:
			if held[e.Process] == nil {
				held[e.Process] = map[string]time.Duration{}
			}
			for _, g := range e.Granted {
				held[e.Process][g.Name] = invoked[e.Process] + e.HoldTTL
			}
		case e.Type == history.Invoke && e.F == history.Release:
			first, all := time.Duration(-1), len(e.Names) > 0
			for _, n := range e.Names {
				d, ok := held[e.Process][n]
				all = all && ok
				if first < 0 || d < first {
					first = d
				}
				delete(held[e.Process], n) // released, or found gone
			}
			if all {
				out[e.Index] = first
			}
		}
	}
	return out
}

// HoldTTL checks hold TTLs from above: a hold granted with a hold TTL is
// over by its latest end, and nothing shows it held later. The evidence
// is an operation that could only see the hold while the table still
// had it: an ok observe (a linearizable read) that returned the holder
// (its session and token), or an ok release of the grant's names, each
// invoked after the latest end. A hold lockd kept past its TTL — a table
// clock frozen by a step back of the wall clock, hold TTLs ignored — is
// seen by a holder that overstays its grant and then looks (the
// workloads do so one round in eight under --hold-ttl). Holds of grants
// of unknown outcome are not judged, nor those a session was granted
// again without a TTL (grantHolds).
//
// The latest end (HoldTTLBound) is the acquire's ok plus the hold TTL,
// plus HoldTTLSlack, plus the time the run spent in faults of the
// cluster between that ok and the evidence's invoke. lockd measures a
// hold TTL from the table time of its grant, stamped before the ok, and
// table time runs at the leader's monotonic rate whatever the wall
// clocks do (docs/architecture.md, "Time"): the clock faults and client
// pauses give no allowance. It may fall behind, which makes deadlines
// later, only while nodes restart or leaders change, and an expiry waits
// for a leader to commit its Tick: the faults that may cause either
// count from the nemesis's previous event (a fault is applied before its
// start is recorded) to faultGrace after their stop, and the slack covers
// a Tick's commit and an election outside faults.
func HoldTTL(events []history.Event, cfg Config) Result {
	r := newResult("hold-ttl")
	bound := NewHoldTTLBound(events)
	holds := map[holdKey]*ttlHold{}
	untimed := map[holdKey]bool{} // granted once without a TTL: the hold may never end by itself
	invoked := map[int]history.Event{}
	judge := func(k holdKey, token uint64, at history.Event, what string) {
		h := holds[k]
		if h == nil || h.pending || h.token != token {
			return
		}
		r.Counts["checked"]++
		if bound.Over(h.ok, h.ttl, at.Time) {
			r.anomaly(cfg, "hold kept past its TTL: process %d %q token %d (hold TTL %v, granted at event %d) %s at event %d, %v after the grant's ok (latest end: %v after it)",
				h.proc, k.name, h.token, h.ttl, h.idx, what, at.Index, (at.Time - h.ok).Round(time.Millisecond),
				(bound.latestEnd(h.ok, h.ttl, at.Time) - h.ok).Round(time.Millisecond))
		}
	}
	for _, e := range events {
		if e.Process < 0 {
			continue
		}
		inv := invoked[e.Process]
		switch {
		case e.F == history.Acquire:
			grantHolds(holds, untimed, inv, e, &r)
		case e.F == history.Observe && e.Type == history.OK && len(inv.Names) == 1:
			for _, ho := range e.Holders {
				judge(holdKey{ho.Session, inv.Names[0]}, ho.Token, inv, "seen held by an observe")
			}
		case e.F == history.Release && e.Type == history.OK:
			for _, n := range inv.Names {
				if h := holds[holdKey{e.Session, n}]; h != nil {
					judge(holdKey{e.Session, n}, h.token, inv, "released (ok)")
					delete(holds, holdKey{e.Session, n})
				}
			}
		}
		if e.Type == history.Invoke {
			invoked[e.Process] = e
		}
	}
	return r
}

// holdKey is a session's hold of a name: one at most.
type holdKey struct{ session, name string }

// ttlHold is a hold granted with a hold TTL, as HoldTTL bounds it.
type ttlHold struct {
	proc    int
	token   uint64
	ok, ttl time.Duration // the grant whose end is the latest
	idx     int           // history index of that grant's ok
	pending bool          // the session asks for the name again: the end may move
}

// grantHolds follows an acquire event e (inv its invoke) in holds. A
// grant again of a name the session holds (reentrant, or an upgrade)
// extends the hold to the later of the two ends, so the hold is not
// judged while it is asked for; a grant without a TTL may keep it for
// ever (untimed).
func grantHolds(holds map[holdKey]*ttlHold, untimed map[holdKey]bool, inv, e history.Event, r *Result) {
	switch e.Type {
	case history.Invoke:
		for _, l := range e.Locks {
			if h := holds[holdKey{e.Session, l.Name}]; h != nil {
				h.pending = true
			}
		}
		return
	case history.OK:
		if inv.HoldTTL > 0 {
			r.Counts["grants"]++
		}
		for _, g := range e.Granted {
			k := holdKey{e.Session, g.Name}
			if inv.HoldTTL <= 0 {
				untimed[k] = true
			}
			if untimed[k] {
				delete(holds, k)
				continue
			}
			h := &ttlHold{proc: e.Process, token: g.Token, ok: e.Time, ttl: inv.HoldTTL, idx: e.Index}
			if old := holds[k]; old != nil && old.ok+old.ttl > h.ok+h.ttl {
				h.ok, h.ttl, h.idx = old.ok, old.ttl, old.idx
			}
			holds[k] = h
		}
	}
	for _, l := range inv.Locks { // a failed acquire changed nothing; one of unknown outcome may have
		k := holdKey{e.Session, l.Name}
		if h := holds[k]; h != nil && h.pending {
			h.pending = false
			if e.Type == history.Info {
				delete(holds, k)
			}
		}
	}
}

// HoldTTLSlack is how much later than its hold TTL after the acquire's ok
// a correct lockd may still show a hold outside faults: the Tick that
// ends it proposed and committed, and one election that load alone may
// cause (raft's timeouts: 1–2 s at --raft-timing 1), with room.
const HoldTTLSlack = 5 * time.Second

// HoldTTLBound says by when a correct lockd has ended a hold granted with
// a hold TTL (see HoldTTL).
type HoldTTLBound struct {
	slow []timeWindow // merged, in order: faults that may delay an expiry
}

// NewHoldTTLBound reads the run's faults from events. Every nemesis fault
// counts except the clock faults (clock-bump, clock-strobe) and client
// pauses, which leave the cluster's table time alone; a fault counts from
// the nemesis's event before its start (0: the run's) to faultGrace after
// its stop, or for ever when it never stopped. The nemesis's recovery
// after its last stop counts until faultGrace after the final phase
// begins.
func NewHoldTTLBound(events []history.Event) HoldTTLBound {
	var ws []timeWindow
	var prev, last time.Duration // the nemesis's previous event; its last stop of a counted fault
	open := map[string]time.Duration{}
	counted := false
	for _, e := range events {
		switch {
		case e.Process == history.Harness && e.F == history.Phase && e.Fault == "final" && counted:
			ws = append(ws, timeWindow{last, e.Time + faultGrace})
		case e.Process != history.Nemesis || e.F != history.Start && e.F != history.Stop:
			continue
		case e.Fault == "clock-bump" || e.Fault == "clock-strobe" || e.Fault == "client-pause":
		case e.F == history.Start:
			open[e.Fault+fmt.Sprint(e.Targets)] = prev
		default:
			key := e.Fault + fmt.Sprint(e.Targets)
			if from, ok := open[key]; ok {
				ws = append(ws, timeWindow{from, e.Time + faultGrace})
				delete(open, key)
				last, counted = e.Time, true
			}
		}
		if e.Process == history.Nemesis {
			prev = e.Time
		}
	}
	for _, from := range open {
		ws = append(ws, timeWindow{from, time.Duration(1<<63 - 1)})
	}
	return HoldTTLBound{slow: mergeWindows(ws)}
}

// Over reports whether a hold acknowledged at ok with hold TTL ttl is
// certainly over at run time at.
func (b HoldTTLBound) Over(ok, ttl, at time.Duration) bool { return at > b.latestEnd(ok, ttl, at) }

// latestEnd is the latest end of such a hold, judged at at: ok + ttl +
// HoldTTLSlack + the faults' time between ok and at.
func (b HoldTTLBound) latestEnd(ok, ttl, at time.Duration) time.Duration {
	end := ok + ttl + HoldTTLSlack
	for _, w := range b.slow {
		from, to := max(w.from, ok), min(w.to, at)
		if to > from {
			end += to - from
		}
	}
	return end
}

// mergeWindows returns the union of ws as disjoint windows in order.
func mergeWindows(ws []timeWindow) []timeWindow {
	slices.SortFunc(ws, func(a, b timeWindow) int { return cmp.Compare(a.from, b.from) })
	var out []timeWindow
	for _, w := range ws {
		if n := len(out); n > 0 && w.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, w.to)
			continue
		}
		out = append(out, w)
	}
	return out
}
