package checker

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Safety checks mutual exclusion where it matters: at the resource.
//
// A hold (process, name, token) is active at the resource from its first
// to its last accepted fenced operation (res-read/res-write, in Seq
// order); two conflicting holds of different processes whose windows
// overlap are a violation. A fenced operation accepted after a
// conflicting operation of another process with a larger token is a
// "stale write accepted". For semaphores, more than limit res-enter ..
// res-exit windows overlapping on a name is a violation, unless the
// surplus is made of processes whose session was lost (a client paused
// past its TTL legitimately overlaps the unfenced resource): those are
// counted as "excused".
func Safety(events []history.Event, cfg Config) Result {
	r := newResult("safety")
	if !cfg.Fenced {
		r.Note = "resource unfenced (negative control)"
	}
	lims := limits(events, cfg)
	fenced, sem := resourceUses(events, &r)
	overlappingResourceHolds(fenced, lims, cfg, &r)
	staleUsesAccepted(fenced, lims, cfg, &r)
	lost := LostProcesses(events)
	semaphoreOverflows(events, sem, lims, lost, cfg, &r)
	concurrentHolds(events, lims, lost, cfg, &r)
	return r
}

// resourceUse is an accepted resource operation.
type resourceUse struct {
	seq  uint64 // order among accepted operations
	idx  int    // history index of the completion
	proc int
	f    string
	g    history.Granted // the hold it was made under
}

// resourceUses returns the accepted resource operations in Seq order:
// the fenced ones (res-read, res-write) and the semaphore's (res-enter,
// res-exit); it counts the outcomes of all of them.
func resourceUses(events []history.Event, r *Result) (fenced, sem []resourceUse) {
	for _, o := range ops(events) {
		switch o.inv.F {
		case history.ResRead, history.ResWrite, history.ResEnter, history.ResExit:
		default:
			continue
		}
		var g history.Granted
		gs := o.granted()
		switch {
		case len(gs) > 0:
			g = gs[0]
		case len(o.inv.Names) > 0:
			g.Name = o.inv.Names[0]
		}
		if g.Token == 0 {
			g.Token = o.inv.Token
		}
		switch o.typ() {
		case history.OK:
			u := resourceUse{seq: o.comp.Seq, idx: o.comp.Index, proc: o.inv.Process, f: o.inv.F, g: g}
			if o.inv.F == history.ResEnter || o.inv.F == history.ResExit {
				sem = append(sem, u)
			} else {
				r.Counts["accepted"]++
				fenced = append(fenced, u)
			}
		case history.Fail:
			if o.errString() == "stale" {
				r.Counts["rejected-stale"]++
			} else {
				r.Counts["failed-other"]++
			}
		default:
			r.Counts["unknown"]++
		}
	}
	bySeq := func(s []resourceUse) {
		sort.SliceStable(s, func(i, j int) bool { return s[i].seq < s[j].seq })
	}
	bySeq(fenced)
	bySeq(sem)
	return fenced, sem
}

// resourceHold is the window of a hold (process, name, token) at the
// fenced resource: from its first to its last accepted operation.
type resourceHold struct {
	proc              int
	name              string
	token             uint64
	mode              string
	first, last       uint64 // Seq
	firstIdx, lastIdx int    // history index
}

// overlappingResourceHolds flags conflicting holds of different
// processes whose windows at the resource overlap.
func overlappingResourceHolds(fenced []resourceUse, lims map[string]int, cfg Config, r *Result) {
	type holdKey struct {
		proc  int
		name  string
		token uint64
	}
	holds := map[holdKey]*resourceHold{}
	var order []*resourceHold // in order of first Seq
	for _, u := range fenced {
		k := holdKey{u.proc, u.g.Name, u.g.Token}
		w := holds[k]
		if w == nil {
			w = &resourceHold{proc: u.proc, name: u.g.Name, token: u.g.Token, mode: u.g.Mode, first: u.seq, firstIdx: u.idx}
			holds[k] = w
			order = append(order, w)
		}
		if isWrite(u.g.Mode) {
			w.mode = "write"
		}
		w.last, w.lastIdx = u.seq, u.idx
	}
	r.Counts["holds"] = len(order)
	// Sweep by start: the active set stays small in a sane history.
	var active []*resourceHold
	for _, w := range order {
		keep := active[:0]
		for _, x := range active {
			if x.last >= w.first {
				keep = append(keep, x)
			}
		}
		active = keep
		for _, x := range active {
			if x.proc == w.proc || lims[w.name] > 1 || lims[x.name] > 1 {
				continue
			}
			if conflict(x.name, x.mode, w.name, w.mode) {
				r.anomaly(cfg, "overlapping holds at the resource: process %d %s %q token %d (events %d..%d) and process %d %s %q token %d (events %d..%d)",
					x.proc, x.mode, x.name, x.token, x.firstIdx, x.lastIdx, w.proc, w.mode, w.name, w.token, w.firstIdx, w.lastIdx)
			}
		}
		active = append(active, w)
	}
}

// staleUsesAccepted flags a fenced operation accepted after a
// conflicting operation of another process with a larger token. Per
// (name, write?) it keeps the largest tokens of the two processes with
// the largest tokens, so that "another process" is answered in O(1) per
// name.
func staleUsesAccepted(fenced []resourceUse, lims map[string]int, cfg Config, r *Result) {
	type best struct {
		tok1, tok2   uint64
		proc1, proc2 int
		idx1, idx2   int
	}
	type nameMode struct {
		name  string
		write bool
	}
	seen := map[nameMode]*best{}
	var names []nameMode
	for _, u := range fenced {
		w := isWrite(u.g.Mode)
		for _, n := range names {
			if !related(n.name, u.g.Name) || !(w || n.write) || lims[n.name] > 1 {
				continue
			}
			b := seen[n]
			tok, proc, idx := b.tok1, b.proc1, b.idx1
			if proc == u.proc {
				tok, proc, idx = b.tok2, b.proc2, b.idx2
			}
			if tok > u.g.Token {
				r.Counts["stale-accepted"]++
				r.anomaly(cfg, "stale write accepted: event %d (process %d, %s %q token %d) after event %d (process %d, %q token %d)",
					u.idx, u.proc, u.f, u.g.Name, u.g.Token, idx, proc, n.name, tok)
			}
		}
		k := nameMode{u.g.Name, w}
		b := seen[k]
		if b == nil {
			b = &best{proc1: math.MinInt, proc2: math.MinInt}
			seen[k] = b
			names = append(names, k)
		}
		switch {
		case u.proc == b.proc1:
			if u.g.Token > b.tok1 {
				b.tok1, b.idx1 = u.g.Token, u.idx
			}
		case u.g.Token > b.tok1:
			b.tok2, b.proc2, b.idx2 = b.tok1, b.proc1, b.idx1
			b.tok1, b.proc1, b.idx1 = u.g.Token, u.proc, u.idx
		case u.g.Token > b.tok2:
			b.tok2, b.proc2, b.idx2 = u.g.Token, u.proc, u.idx
		}
	}
}

// semaphoreOverflows flags more than limit users inside a semaphore's
// resource at once: a user is inside from its res-enter to its next
// res-exit of the name (no exit: to the end). Users whose session was
// lost later, with nothing proving it alive after the moment, may have
// expired already, and so may users past their hold TTL's deadline: a
// surplus made of them is "excused".
func semaphoreOverflows(events []history.Event, sem []resourceUse, lims map[string]int, lost map[int]bool, cfg Config, r *Result) {
	type user struct {
		proc int
		name string
	}
	inside := map[user]int{}       // open enters
	insideTok := map[user]uint64{} // the token of the last enter
	count := map[string]int{}      // inside, per name
	alive := lastAlive(events)
	deadlines := holdDeadlines(events)
	expired := func(q user, at time.Duration) bool { // its hold TTL may have ended it
		d, ok := deadlines[procToken{q.proc, insideTok[q]}]
		return ok && d <= at
	}
	for _, u := range sem {
		k := user{u.proc, u.g.Name}
		if u.f == history.ResExit {
			if inside[k] > 0 {
				inside[k]--
				count[u.g.Name]--
			}
			continue
		}
		r.Counts["sem-enters"]++
		inside[k]++
		insideTok[k] = u.g.Token
		count[u.g.Name]++
		lim := lims[u.g.Name]
		if lim < 1 {
			lim = max(cfg.Limit, 1)
		}
		r.Counts["sem-max-inside"] = max(r.Counts["sem-max-inside"], count[u.g.Name])
		n := count[u.g.Name]
		if n <= lim {
			continue
		}
		excusable := 0
		for q, c := range inside {
			if q.name == u.g.Name && c > 0 && (lost[q.proc] && alive[q.proc] < u.idx || expired(q, events[u.idx].Time)) {
				excusable += c
			}
		}
		if n-excusable > lim {
			r.anomaly(cfg, "semaphore %q: %d users inside (limit %d) at event %d (process %d)", u.g.Name, n, lim, u.idx, u.proc)
		} else {
			r.Counts["excused"]++
		}
	}
}

// concurrentHolds flags two conflicting holds of live sessions that were
// both acknowledged, both used (a resource operation invoked under them)
// and held at the same time as the clients saw it: from the acquire's ok
// to the invoke of the release (or close). For a client that was paused
// — the only kind that can miss its session's expiry — only up to an
// acknowledged release, else as long as the session is proven alive (the
// invoke of its last acknowledged acquire or release or definite
// failure). A hold with a TTL counts up to its deadline (invoke + TTL)
// at most. Unlike the windows at the resource, this cannot be hidden by
// fencing, which refuses the older holder's uses. Processes whose
// session was lost are left out: their holds may have ended early.
func concurrentHolds(events []history.Event, lims map[string]int, lost map[int]bool, cfg Config, r *Result) {
	holds, aliveAt, end := clientHolds(events, lost)
	paused := pausedProcesses(events)
	deadlines := holdDeadlines(events)
	var used []*clientHold
	for _, h := range holds {
		if h.to < 0 {
			h.to = end
		}
		if d, ok := deadlines[procToken{h.proc, h.token}]; ok {
			h.to = min(h.to, d) // a hold TTL may end it from there on
		}
		if paused[h.proc] && !(h.release && h.acked) {
			h.to = min(h.to, aliveAt[h.proc])
		}
		if h.used && lims[h.name] <= 1 && h.to > h.from {
			used = append(used, h)
		}
	}
	r.Counts["holds-checked"] = len(used)
	sort.SliceStable(used, func(i, j int) bool { return used[i].from < used[j].from })
	var active []*clientHold
	for _, h := range used {
		keep := active[:0]
		for _, x := range active {
			if x.to > h.from {
				keep = append(keep, x)
			}
		}
		active = keep
		for _, x := range active {
			if x.proc != h.proc && conflict(x.name, x.mode, h.name, h.mode) {
				r.anomaly(cfg, "conflicting holds at the same time: process %d %s %q token %d (granted at event %d) and process %d %s %q token %d (granted at event %d), both sessions live",
					x.proc, x.mode, x.name, x.token, x.idx, h.proc, h.mode, h.name, h.token, h.idx)
			}
		}
		active = append(active, h)
	}
}

// clientHold is a grant as its client saw it.
type clientHold struct {
	proc       int
	name, mode string
	token      uint64
	from, to   time.Duration // acquire ok .. release or close invoke (-1: none)
	idx        int           // history index of the acquire ok
	used       bool          // a resource operation was invoked under it
	release    bool          // ended by a release ...
	acked      bool          // ... that was acknowledged
}

// clientHolds returns the holds of the processes whose session was not
// lost, when each process's session was last proven alive (the invoke
// of its last alive proof), and the time of the last event.
func clientHolds(events []history.Event, lost map[int]bool) (holds []*clientHold, aliveAt map[int]time.Duration, end time.Duration) {
	open := map[int][]*clientHold{}      // process -> its open holds
	releasing := map[int][]*clientHold{} // process -> holds its pending release ends
	invoked := map[int]time.Duration{}
	aliveAt = map[int]time.Duration{}
	for _, e := range events {
		end = max(end, e.Time)
		if e.Process < 0 || lost[e.Process] {
			continue
		}
		switch {
		case e.F == history.Acquire && e.Type == history.OK:
			for _, g := range e.Granted {
				h := &clientHold{proc: e.Process, name: g.Name, mode: g.Mode, token: g.Token, from: e.Time, to: -1, idx: e.Index}
				holds = append(holds, h)
				open[e.Process] = append(open[e.Process], h)
			}
		case (e.F == history.ResRead || e.F == history.ResWrite) && e.Type == history.Invoke:
			for _, h := range open[e.Process] {
				if len(e.Granted) > 0 && h.name == e.Granted[0].Name && h.token == e.Token {
					h.used = true
				}
			}
		case e.F == history.Release && e.Type == history.Invoke:
			open[e.Process] = startRelease(open[e.Process], e, releasing)
		case e.F == history.Release && e.Type != history.Invoke:
			if e.Type == history.OK {
				for _, h := range releasing[e.Process] {
					h.acked = true
				}
			}
			delete(releasing, e.Process)
		case e.F == history.Close && e.Type == history.Invoke:
			for _, h := range open[e.Process] {
				h.to = e.Time
			}
			delete(open, e.Process)
		}
		if e.Type == history.Invoke {
			invoked[e.Process] = e.Time
		} else if provesAlive(e) {
			aliveAt[e.Process] = invoked[e.Process]
		}
	}
	return holds, aliveAt, end
}

// startRelease ends the holds of open that the release invoke e names,
// moves them to releasing, and returns the holds still open.
func startRelease(open []*clientHold, e history.Event, releasing map[int][]*clientHold) []*clientHold {
	keep := open[:0]
	for _, h := range open {
		if slices.Contains(e.Names, h.name) {
			h.to, h.release = e.Time, true
			releasing[e.Process] = append(releasing[e.Process], h)
		} else {
			keep = append(keep, h)
		}
	}
	return keep
}
