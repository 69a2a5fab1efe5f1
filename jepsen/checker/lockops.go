package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockd/lockd/jepsen/history"
)

// LockInput is the input of a lock operation in the porcupine model.
type LockInput struct {
	Kind    string // history.Acquire, Release, Close or Lost
	Process int
	Part    int // partition
	Locks   []history.Lock
	Require string
	Names   []string
	Index   int // history index of the invoke (of the lost event)
}

// LockOutput is the outcome of a lock operation.
type LockOutput struct {
	Type    history.Type // ok, fail or info (info also: no completion)
	Granted []history.Granted
	Error   string
	// Observed: the holders an ok observe read (Proc -1: a session no
	// process of the history owns).
	Observed []Observed
}

// Observed is one holder an observe read returned.
type Observed struct {
	Proc  int
	Write bool
	Token uint64
}

// LockOperations converts the lock operations of a history to porcupine
// operations: Call = invoke time, Return = completion time, or after the
// last event for info and missing completions. A lost event becomes an
// operation that ends all the process's holds, from when the session was
// last known alive (the invoke of its latest acknowledged acquire or
// release or definitely failed acquire, else its first event) to the
// lost event; so does a release
// failing not_held or a failed close without an earlier lost.
func LockOperations(events []history.Event, cfg Config) []porcupine.Operation {
	if len(events) == 0 {
		return nil
	}
	lims := limits(events, cfg)
	// An expiry (lost, or inferred from a failed release or close) ends
	// the holds at an unknown time, but after the session was last seen
	// alive: the invoke of its latest acknowledged acquire or release,
	// else its first event. The tight window keeps porcupine's search
	// small.
	var end time.Duration
	procOf := map[string]int{}       // session -> process
	since := map[int]time.Duration{} // process -> alive since
	invoked := map[int]time.Duration{}
	expiryFrom := map[int]time.Duration{} // event index -> window start
	for _, e := range events {
		end = max(end, e.Time)
		if e.Process < 0 {
			continue
		}
		if e.Session != "" {
			procOf[e.Session] = e.Process
		}
		if _, ok := since[e.Process]; !ok {
			since[e.Process] = e.Time
		}
		switch {
		case e.Type == history.Invoke:
			invoked[e.Process] = e.Time
		case provesAlive(e):
			since[e.Process] = invoked[e.Process]
		case e.F == history.Lost, e.Type == history.Fail:
			expiryFrom[e.Index] = since[e.Process]
		}
	}
	end++

	// Partitions: union-find over the first segment of the names one
	// acquire links together.
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		p, ok := parent[x]
		if !ok {
			parent[x] = x
			return x
		}
		if p == x {
			return x
		}
		root := find(p)
		parent[x] = root
		return root
	}
	root := func(name string) string { return strings.SplitN(name, "/", 2)[0] }
	for _, e := range events {
		if e.F == history.Acquire && e.Type == history.Invoke && len(e.Locks) > 0 {
			a := find(root(e.Locks[0].Name))
			for _, l := range e.Locks[1:] {
				if b := find(root(l.Name)); b != a {
					parent[b] = a
				}
			}
		}
	}
	partOf := map[string]int{}
	part := func(name string) int {
		r := find(root(name))
		p, ok := partOf[r]
		if !ok {
			p = len(partOf)
			partOf[r] = p
		}
		return p
	}

	clients := map[int]int{}
	client := func(proc int) int {
		c, ok := clients[proc]
		if !ok {
			c = len(clients)
			clients[proc] = c
		}
		return c
	}
	procParts := map[int]map[int]bool{} // partitions a process touched
	touch := func(proc, p int) {
		if procParts[proc] == nil {
			procParts[proc] = map[int]bool{}
		}
		procParts[proc][p] = true
	}

	type pending struct {
		in      LockInput
		out     LockOutput
		call    time.Duration
		ret     time.Duration
		client  int
		perProc bool // close/lost: copied into each partition of the process
	}
	var ps []pending
	lostSeen := map[int]bool{}
	expire := func(proc, idx int, at time.Duration) {
		ps = append(ps, pending{
			in:  LockInput{Kind: history.Lost, Process: proc, Index: idx},
			out: LockOutput{Type: history.Info}, call: expiryFrom[idx], ret: at,
			client: -1, perProc: true,
		})
	}
	for _, e := range events {
		if e.F == history.Lost && e.Process >= 0 && !lostSeen[e.Process] {
			lostSeen[e.Process] = true
			expire(e.Process, e.Index, e.Time)
		}
	}
	for _, o := range ops(events) {
		out := LockOutput{Type: o.typ(), Error: o.errString()}
		ret := end
		if o.comp != nil && o.comp.Type != history.Info {
			ret = o.comp.Time
			out.Granted = o.comp.Granted
		}
		in := LockInput{Kind: o.inv.F, Process: o.inv.Process, Index: o.inv.Index}
		p := pending{in: in, out: out, call: o.inv.Time, ret: ret, client: client(o.inv.Process)}
		switch o.inv.F {
		case history.Acquire:
			if len(o.inv.Locks) == 0 {
				continue
			}
			p.in.Require = o.inv.Require
			for _, l := range o.inv.Locks {
				if l.Limit == 0 {
					l.Limit = lims[l.Name]
				}
				p.in.Locks = append(p.in.Locks, l)
			}
			p.in.Part = part(o.inv.Locks[0].Name)
			touch(o.inv.Process, p.in.Part)
			ps = append(ps, p)
		case history.Release:
			// One operation per partition the names fall in.
			byPart := map[int][]string{}
			var order []int
			for _, n := range o.inv.Names {
				pp := part(n)
				if _, ok := byPart[pp]; !ok {
					order = append(order, pp)
				}
				byPart[pp] = append(byPart[pp], n)
			}
			for _, pp := range order {
				q := p
				q.in.Part, q.in.Names = pp, byPart[pp]
				touch(o.inv.Process, pp)
				ps = append(ps, q)
			}
			if out.Type == history.Fail && out.Error == "not_held" && !lostSeen[o.inv.Process] {
				lostSeen[o.inv.Process] = true
				expire(o.inv.Process, o.comp.Index, ret)
			}
		case history.Observe:
			// A read changes nothing: only what it saw can be wrong.
			if out.Type != history.OK || len(o.inv.Names) != 1 {
				continue
			}
			for _, h := range o.comp.Holders {
				proc, ok := procOf[h.Session]
				if !ok {
					proc = -1
				}
				p.out.Observed = append(p.out.Observed, Observed{Proc: proc, Write: isWrite(h.Mode), Token: h.Token})
			}
			p.in.Names = o.inv.Names
			p.in.Part = part(o.inv.Names[0])
			ps = append(ps, p)
		case history.Close:
			p.perProc = true
			ps = append(ps, p)
			if out.Type == history.Fail && !lostSeen[o.inv.Process] {
				lostSeen[o.inv.Process] = true
				expire(o.inv.Process, o.comp.Index, ret)
			}
		}
	}
	// A paused client whose fate is unknown (an operation ended info,
	// and it never learned its session was lost) may have lost its
	// session unnoticed: its holds may end any time after the session
	// was last proven alive.
	paused := pausedProcesses(events)
	var uncertain []int
	for _, e := range events {
		if e.Process >= 0 && paused[e.Process] && e.Type == history.Info && e.F != history.Lost && !lostSeen[e.Process] {
			lostSeen[e.Process] = true
			uncertain = append(uncertain, e.Process)
		}
	}
	for _, proc := range uncertain {
		ps = append(ps, pending{
			in:  LockInput{Kind: history.Lost, Process: proc, Index: -1},
			out: LockOutput{Type: history.Info}, call: since[proc], ret: end,
			client: -1, perProc: true,
		})
	}
	lane := len(clients)
	var hops []porcupine.Operation
	add := func(p pending, part int) {
		in := p.in
		in.Part = part
		c := p.client
		if c < 0 {
			c = lane
			lane++
		}
		hops = append(hops, porcupine.Operation{
			ClientId: c, Input: in, Output: p.out,
			Call: int64(p.call), Return: int64(p.ret),
			Metadata: fmt.Sprintf("event %d, process %d", p.in.Index, p.in.Process),
		})
	}
	for _, p := range ps {
		if !p.perProc {
			add(p, p.in.Part)
			continue
		}
		parts := make([]int, 0, len(procParts[p.in.Process]))
		for pp := range procParts[p.in.Process] {
			parts = append(parts, pp)
		}
		sort.Ints(parts)
		for _, pp := range parts {
			add(p, pp)
		}
	}
	return hops
}
