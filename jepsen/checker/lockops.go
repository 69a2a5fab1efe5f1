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
	// Expirable, on an ok release, says that every hold it names has a
	// hold TTL that may have ended it before the release applied: after
	// an attempt of unknown outcome the client reads the grant's request,
	// which says "released" for a hold that expired too, and answers ok.
	Expirable bool
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
// operations: Call = invoke time, Return = completion time, or for info
// and missing completions the invoke of the process's ok close, else
// after the last event. A lost event becomes an
// operation that ends all the process's holds, from when the session was
// last known alive (the invoke of its latest acknowledged acquire or
// release or definitely failed acquire, else its first event) to the
// lost event; so does a release failing not_held or a failed close
// without an earlier lost.
func LockOperations(events []history.Event, cfg Config) []porcupine.Operation {
	if len(events) == 0 {
		return nil
	}
	b := &lockOpsBuilder{
		limits:     limits(events, cfg),
		sessions:   scanSessionLiveness(events),
		partitions: newLockPartitions(events),
		clients:    map[int]int{},
		procParts:  map[int]map[int]bool{},
		expired:    map[int]bool{},

		ttlDeadline: releaseDeadlines(events),
	}
	for _, o := range ops(events) {
		b.addClientOp(o)
	}
	b.addLostEvents(events) // after the not_held answers, whose windows are tighter
	b.addUnknownFates(events)
	b.addHoldExpiries(events)
	return b.operations()
}

// sessionLiveness says when each session was last known alive. An
// expiry (lost, or inferred from a failed release or close) ends the
// holds at an unknown time, but after the session was last seen alive:
// the invoke of its latest acknowledged acquire or release (or definite
// acquire failure), else its first event. The tight window keeps
// porcupine's search small.
type sessionLiveness struct {
	end        time.Duration         // just after the last event
	closedAt   map[int]time.Duration // process -> invoke of its close that returned ok
	closeDone  map[int]time.Duration // process -> completion of that close
	procOf     map[string]int        // session -> process
	aliveSince map[int]time.Duration // process -> last known alive
	expiryFrom map[int]time.Duration // index of a lost or failed event -> window start
}

func scanSessionLiveness(events []history.Event) sessionLiveness {
	s := sessionLiveness{
		procOf:     map[string]int{},
		closedAt:   map[int]time.Duration{},
		closeDone:  map[int]time.Duration{},
		aliveSince: map[int]time.Duration{},
		expiryFrom: map[int]time.Duration{},
	}
	invoked := map[int]time.Duration{}
	for _, e := range events {
		s.end = max(s.end, e.Time)
		if e.Process < 0 {
			continue
		}
		if e.Session != "" {
			s.procOf[e.Session] = e.Process
		}
		if _, ok := s.aliveSince[e.Process]; !ok {
			s.aliveSince[e.Process] = e.Time
		}
		if e.F == history.Close && e.Type == history.OK {
			s.closedAt[e.Process], s.closeDone[e.Process] = invoked[e.Process], e.Time
		}
		switch {
		case e.Type == history.Invoke:
			invoked[e.Process] = e.Time
		case provesAlive(e):
			s.aliveSince[e.Process] = invoked[e.Process]
		case e.F == history.Lost, e.Type == history.Fail:
			s.expiryFrom[e.Index] = s.aliveSince[e.Process]
		}
	}
	s.end++
	return s
}

// lockPartitions splits the names into groups no acquire links, by
// their first path segment (so the hierarchy stays inside a group): a
// union-find whose groups are numbered in the order they are first
// asked for.
type lockPartitions struct {
	parent map[string]string
	number map[string]int // root -> partition
}

func newLockPartitions(events []history.Event) *lockPartitions {
	p := &lockPartitions{parent: map[string]string{}, number: map[string]int{}}
	for _, e := range events {
		if e.F == history.Acquire && e.Type == history.Invoke && len(e.Locks) > 0 {
			a := p.find(topSegment(e.Locks[0].Name))
			for _, l := range e.Locks[1:] {
				if b := p.find(topSegment(l.Name)); b != a {
					p.parent[b] = a
				}
			}
		}
	}
	return p
}

func topSegment(name string) string { return strings.SplitN(name, "/", 2)[0] }

func (p *lockPartitions) find(x string) string {
	parent, ok := p.parent[x]
	if !ok {
		p.parent[x] = x
		return x
	}
	if parent == x {
		return x
	}
	root := p.find(parent)
	p.parent[x] = root
	return root
}

// of returns the partition of name.
func (p *lockPartitions) of(name string) int {
	root := p.find(topSegment(name))
	n, ok := p.number[root]
	if !ok {
		n = len(p.number)
		p.number[root] = n
	}
	return n
}

// pendingOp is an operation before its partition and client are final.
type pendingOp struct {
	in     LockInput
	out    LockOutput
	call   time.Duration
	ret    time.Duration
	client int // -1: a lane of its own
	// perProcess: a close or expiry, copied into each partition the
	// process touched.
	perProcess bool
}

// lockOpsBuilder collects the operations of LockOperations.
type lockOpsBuilder struct {
	limits     map[string]int
	sessions   sessionLiveness
	partitions *lockPartitions
	clients    map[int]int          // process -> porcupine client
	procParts  map[int]map[int]bool // process -> partitions it touched
	pending    []pendingOp
	expired    map[int]bool // processes given an expiry already
	// ttlDeadline: the invoke index of a release -> the earliest
	// deadline (invoke + hold TTL) of the holds it names, when all of
	// them were granted with a hold TTL.
	ttlDeadline map[int]time.Duration
}

func (b *lockOpsBuilder) client(proc int) int {
	c, ok := b.clients[proc]
	if !ok {
		c = len(b.clients)
		b.clients[proc] = c
	}
	return c
}

func (b *lockOpsBuilder) touch(proc, part int) {
	if b.procParts[proc] == nil {
		b.procParts[proc] = map[int]bool{}
	}
	b.procParts[proc][part] = true
}

// expireOnce adds, unless proc has one already, an expiry of proc's
// session that the event at idx revealed at time at.
func (b *lockOpsBuilder) expireOnce(proc, idx int, at time.Duration) {
	if b.expired[proc] {
		return
	}
	b.expired[proc] = true
	b.pending = append(b.pending, pendingOp{
		in:  LockInput{Kind: history.Lost, Process: proc, Index: idx},
		out: LockOutput{Type: history.Info}, call: b.sessions.expiryFrom[idx], ret: at,
		client: -1, perProcess: true,
	})
}

// addLostEvents adds the expiry of each lost session that no not_held
// answer revealed first. The client gave up on it, which it does a margin
// before the cluster expires it, or learned that the cluster had: either
// way the holds end by the process's ok close (whose delete finds the
// session, or finds it gone), and no sooner than the session was last
// known alive.
func (b *lockOpsBuilder) addLostEvents(events []history.Event) {
	for _, e := range events {
		if e.F != history.Lost || e.Process < 0 {
			continue
		}
		ret := b.sessions.end
		if done, ok := b.sessions.closeDone[e.Process]; ok && done >= e.Time {
			ret = done
		}
		b.expireOnce(e.Process, e.Index, ret)
	}
}

func (b *lockOpsBuilder) addClientOp(o op) {
	out := LockOutput{Type: o.typ(), Error: o.errString()}
	ret := b.sessions.end
	if closed, ok := b.sessions.closedAt[o.inv.Process]; ok && closed-1 > o.inv.Time {
		// An operation of unknown outcome takes effect, if at all, before
		// its session is closed (the client's Close returns ok only once
		// the cluster has no such session): it is placed just before the
		// close's invoke (porcupine orders two operations only when one
		// returns strictly before the other's call), which keeps the
		// search short on long runs. Not exact: a grant applied while the
		// close is in flight is placed before it, so only an observe of
		// that holder after another process held and released the lock
		// within the same close could be judged wrong.
		ret = closed - 1
	}
	if o.comp != nil && o.comp.Type != history.Info {
		ret = o.comp.Time
		out.Granted = o.comp.Granted
	}
	in := LockInput{Kind: o.inv.F, Process: o.inv.Process, Index: o.inv.Index}
	p := pendingOp{in: in, out: out, call: o.inv.Time, ret: ret, client: b.client(o.inv.Process)}
	switch o.inv.F {
	case history.Acquire:
		b.addAcquire(o, p)
	case history.Release:
		b.addRelease(o, p)
	case history.Observe:
		b.addObserve(o, p)
	case history.Close:
		p.perProcess = true
		b.pending = append(b.pending, p)
		if out.Type == history.Fail {
			b.expireOnce(o.inv.Process, o.comp.Index, ret)
		}
	}
}

func (b *lockOpsBuilder) addAcquire(o op, p pendingOp) {
	if len(o.inv.Locks) == 0 {
		return
	}
	p.in.Require = o.inv.Require
	for _, l := range o.inv.Locks {
		if l.Limit == 0 {
			l.Limit = b.limits[l.Name]
		}
		p.in.Locks = append(p.in.Locks, l)
	}
	p.in.Part = b.partitions.of(o.inv.Locks[0].Name)
	b.touch(o.inv.Process, p.in.Part)
	b.pending = append(b.pending, p)
}

// addRelease adds one operation per partition the names fall in.
func (b *lockOpsBuilder) addRelease(o op, p pendingOp) {
	d, ttl := b.ttlDeadline[o.inv.Index]
	p.in.Expirable = ttl && p.out.Type == history.OK && d < p.ret
	byPart := map[int][]string{}
	var order []int
	for _, n := range o.inv.Names {
		part := b.partitions.of(n)
		if _, ok := byPart[part]; !ok {
			order = append(order, part)
		}
		byPart[part] = append(byPart[part], n)
	}
	for _, part := range order {
		q := p
		q.in.Part, q.in.Names = part, byPart[part]
		b.touch(o.inv.Process, part)
		b.pending = append(b.pending, q)
	}
	if p.out.Type != history.Fail || p.out.Error != "not_held" {
		return
	}
	if ttl && d < p.ret {
		return // their hold TTL ended them (addHoldExpiries); the session lives on
	}
	b.expireOnce(o.inv.Process, o.comp.Index, p.ret)
}

// addObserve adds an ok read of one name: a read changes nothing, so
// only what it saw can be wrong.
func (b *lockOpsBuilder) addObserve(o op, p pendingOp) {
	if p.out.Type != history.OK || len(o.inv.Names) != 1 {
		return
	}
	for _, h := range o.comp.Holders {
		proc, ok := b.sessions.procOf[h.Session]
		if !ok {
			proc = -1
		}
		p.out.Observed = append(p.out.Observed, Observed{Proc: proc, Write: isWrite(h.Mode), Token: h.Token})
	}
	p.in.Names = o.inv.Names
	p.in.Part = b.partitions.of(o.inv.Names[0])
	b.pending = append(b.pending, p)
}

// addUnknownFates adds an expiry for each paused client whose fate is
// unknown (an operation ended info, and it never learned its session was
// lost): it may have lost its session unnoticed, so its holds may end
// any time after the session was last proven alive, and before its ok
// close if there is one.
func (b *lockOpsBuilder) addUnknownFates(events []history.Event) {
	paused := pausedProcesses(events)
	for _, e := range events {
		if e.Process < 0 || !paused[e.Process] || e.Type != history.Info || e.F == history.Lost || b.expired[e.Process] {
			continue
		}
		b.expired[e.Process] = true
		ret := b.sessions.end
		if closed, ok := b.sessions.closedAt[e.Process]; ok && closed-1 > b.sessions.aliveSince[e.Process] {
			ret = closed - 1 // the session was gone by its ok close at the latest
		}
		b.pending = append(b.pending, pendingOp{
			in:  LockInput{Kind: history.Lost, Process: e.Process, Index: -1},
			out: LockOutput{Type: history.Info}, call: b.sessions.aliveSince[e.Process], ret: ret,
			client: -1, perProcess: true,
		})
	}
}

// operations returns the porcupine operations: each close and expiry
// copied into every partition its process touched, and each expiry on a
// client lane of its own.
func (b *lockOpsBuilder) operations() []porcupine.Operation {
	lane := len(b.clients)
	var out []porcupine.Operation
	add := func(p pendingOp, part int) {
		in := p.in
		in.Part = part
		c := p.client
		if c < 0 {
			c = lane
			lane++
		}
		out = append(out, porcupine.Operation{
			ClientId: c, Input: in, Output: p.out,
			Call: int64(p.call), Return: int64(p.ret),
			Metadata: fmt.Sprintf("event %d, process %d", p.in.Index, p.in.Process),
		})
	}
	for _, p := range b.pending {
		if !p.perProcess {
			add(p, p.in.Part)
			continue
		}
		parts := make([]int, 0, len(b.procParts[p.in.Process]))
		for part := range b.procParts[p.in.Process] {
			parts = append(parts, part)
		}
		sort.Ints(parts)
		for _, part := range parts {
			add(p, part)
		}
	}
	return out
}
