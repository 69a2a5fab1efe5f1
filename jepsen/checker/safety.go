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

	type acc struct {
		seq     uint64
		idx     int
		proc    int
		f       string
		g       history.Granted
		present bool
	}
	var fenced, sem []acc
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
			a := acc{seq: o.comp.Seq, idx: o.comp.Index, proc: o.inv.Process, f: o.inv.F, g: g}
			if o.inv.F == history.ResEnter || o.inv.F == history.ResExit {
				sem = append(sem, a)
			} else {
				r.Counts["accepted"]++
				fenced = append(fenced, a)
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
	bySeq := func(s []acc) {
		sort.SliceStable(s, func(i, j int) bool { return s[i].seq < s[j].seq })
	}
	bySeq(fenced)
	bySeq(sem)

	// Hold windows at the fenced resource.
	type holdKey struct {
		proc  int
		name  string
		token uint64
	}
	type window struct {
		holdKey
		mode              string
		first, last       uint64
		firstIdx, lastIdx int
	}
	wins := map[holdKey]*window{}
	var order []*window
	for _, a := range fenced {
		k := holdKey{a.proc, a.g.Name, a.g.Token}
		w := wins[k]
		if w == nil {
			w = &window{holdKey: k, mode: a.g.Mode, first: a.seq, firstIdx: a.idx}
			wins[k] = w
			order = append(order, w)
		}
		if isWrite(a.g.Mode) {
			w.mode = "write"
		}
		w.last, w.lastIdx = a.seq, a.idx
	}
	r.Counts["holds"] = len(order)
	// Sweep by start: the active set stays small in a sane history.
	var active []*window
	for _, w := range order { // already in order of first seq
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

	// Stale operations accepted: per (name, write?) the largest token of
	// the two processes with the largest tokens, so that "another
	// process" can be answered in O(1) per name.
	type best struct {
		tok1, tok2   uint64
		proc1, proc2 int
		idx1, idx2   int
	}
	type nm struct {
		name  string
		write bool
	}
	seen := map[nm]*best{}
	var names []nm
	for _, a := range fenced {
		w := isWrite(a.g.Mode)
		for _, n := range names {
			if !related(n.name, a.g.Name) || !(w || n.write) || lims[n.name] > 1 {
				continue
			}
			b := seen[n]
			tok, proc, idx := b.tok1, b.proc1, b.idx1
			if proc == a.proc {
				tok, proc, idx = b.tok2, b.proc2, b.idx2
			}
			if tok > a.g.Token {
				r.Counts["stale-accepted"]++
				r.anomaly(cfg, "stale write accepted: event %d (process %d, %s %q token %d) after event %d (process %d, %q token %d)",
					a.idx, a.proc, a.f, a.g.Name, a.g.Token, idx, proc, n.name, tok)
			}
		}
		k := nm{a.g.Name, w}
		b := seen[k]
		if b == nil {
			b = &best{proc1: math.MinInt, proc2: math.MinInt}
			seen[k] = b
			names = append(names, k)
		}
		switch {
		case a.proc == b.proc1:
			if a.g.Token > b.tok1 {
				b.tok1, b.idx1 = a.g.Token, a.idx
			}
		case a.g.Token > b.tok1:
			b.tok2, b.proc2, b.idx2 = b.tok1, b.proc1, b.idx1
			b.tok1, b.proc1, b.idx1 = a.g.Token, a.proc, a.idx
		case a.g.Token > b.tok2:
			b.tok2, b.proc2, b.idx2 = a.g.Token, a.proc, a.idx
		}
	}

	// Semaphore windows: enter .. next exit of the same process and name
	// (no exit: open to the end).
	lost := lostProcesses(events)
	type semKey struct {
		proc int
		name string
	}
	inside := map[semKey]int{} // open enters
	count := map[string]int{}  // inside, per name
	alive := lastAlive(events)
	for _, a := range sem {
		k := semKey{a.proc, a.g.Name}
		if a.f == history.ResExit {
			if inside[k] > 0 {
				inside[k]--
				count[a.g.Name]--
			}
			continue
		}
		r.Counts["sem-enters"]++
		inside[k]++
		count[a.g.Name]++
		lim := lims[a.g.Name]
		if lim < 1 {
			lim = max(cfg.Limit, 1)
		}
		r.Counts["sem-max-inside"] = max(r.Counts["sem-max-inside"], count[a.g.Name])
		n := count[a.g.Name]
		if n <= lim {
			continue
		}
		// Users whose session was lost later, with nothing proving it
		// alive after this moment, may have expired already.
		excusable := 0
		for q, c := range inside {
			if q.name == a.g.Name && c > 0 && lost[q.proc] && alive[q.proc] < a.idx {
				excusable += c
			}
		}
		if n-excusable > lim {
			r.anomaly(cfg, "semaphore %q: %d users inside (limit %d) at event %d (process %d)", a.g.Name, n, lim, a.idx, a.proc)
		} else {
			r.Counts["excused"]++
		}
	}
	concurrentHolds(events, lims, lost, cfg, &r)
	return r
}

// concurrentHolds flags two conflicting holds of live sessions that were
// both acknowledged, both used (a resource operation invoked under them)
// and held at the same time as the clients saw it: from the acquire's ok
// to the invoke of the release (or close). For a client that was paused
// — the only kind that can miss its session's expiry — only up to an
// acknowledged release, else as long as the session is proven alive (the
// invoke of its last acknowledged acquire or release or definite
// failure). Unlike the
// windows at the resource, this cannot be hidden by fencing, which
// refuses the older holder's uses. Processes whose session was lost are
// left out: their holds may have ended early.
func concurrentHolds(events []history.Event, lims map[string]int, lost map[int]bool, cfg Config, r *Result) {
	type held struct {
		proc       int
		name, mode string
		token      uint64
		from, to   time.Duration
		idx        int
		used       bool
		release    bool // ended by a release ...
		acked      bool // ... that was acknowledged
	}
	var holds []*held
	open := map[int][]*held{}      // process -> its open holds
	releasing := map[int][]*held{} // process -> holds its pending release ends
	invoked := map[int]time.Duration{}
	aliveAt := map[int]time.Duration{} // process -> invoke of its last alive proof
	paused := pausedProcesses(events)
	var end time.Duration
	for _, e := range events {
		end = max(end, e.Time)
		if e.Process < 0 || lost[e.Process] {
			continue
		}
		switch {
		case e.F == history.Acquire && e.Type == history.OK:
			for _, g := range e.Granted {
				h := &held{proc: e.Process, name: g.Name, mode: g.Mode, token: g.Token, from: e.Time, to: -1, idx: e.Index}
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
			keep := open[e.Process][:0]
			for _, h := range open[e.Process] {
				if slices.Contains(e.Names, h.name) {
					h.to, h.release = e.Time, true
					releasing[e.Process] = append(releasing[e.Process], h)
				} else {
					keep = append(keep, h)
				}
			}
			open[e.Process] = keep
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
	var used []*held
	for _, h := range holds {
		if h.to < 0 {
			h.to = end
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
	var active []*held
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
