package lockstate

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/lockd/lockd/quorum"
)

// Table is the replicated lock table. It is not safe for concurrent use: the
// FSM serialises Apply and guards reads.
type Table struct {
	index uint64 // index of the last applied entry
	clock int64  // max Now of all applied entries
	seq   uint64 // arrival counter for queued requests

	sessions map[SessionID]*session
	byKey    map[string]*session // sessions with a drawn key (CreateSession.Key)
	nodes    map[string]*node
	requests requestIndex // by session and id (requests.go)
	roots    siblings     // top-level names in creation order

	deadlines deadlines

	forgotten uint64 // index of the last entry that forgot a name

	// Scratch for the entry being applied. Events are carved out of a
	// shared chunk (each result gets a full slice expression, so nobody
	// can append into another's events) to save an allocation per entry.
	events      []Event
	eventsStart int
	candidates  candidateQueue
	touched     []*node
	suspects    []*session // sessions that gained wait-for edges other than by queueing
	justQueued  []*request // requests queued and not yet searched for cycles

	acl    acl                   // tokens (acl.go)
	denied map[string]DeniedCert // the certificate deny list by serial (denycert.go)

	waiting int                    // pending requests, for Limits.Waiters
	owners  map[string]ownerCounts // by token id, for the per-token limits

	counters Counters // for metrics only (counters.go)

	queuedUpgrades int // queued upgrade waiters, so grants skip looking for them when there are none

	// work counts waiter-list steps and candidate evaluations. Nothing reads
	// it but a test that checks a release's cost does not grow with
	// unrelated names.
	work uint64
}

// node is one name in the hierarchy. It exists while it has holds, waiters,
// a lock-delay or live descendants.
//
// It is kept small (most names are held once and never waited for): the
// waiter lists live in a separate block made on first use, children are an
// intrusive sibling list, counters are 32-bit.
type node struct {
	name       string
	parent     *node
	children   siblings   // children in creation order
	prev, next *node      // siblings
	version    uint64     // index of the last entry that changed its queue
	limit      int        // semaphore size while in use; 0 when unused
	holds      []*hold    // in grant order
	waiting    *waitQueue // nil until a waiter is queued here or below
	delayUntil int64      // lock-delay end on the table clock; 0 = none

	readers, writers        int32 // holds here, by mode
	weight                  int32 // sum of write holds' weights here
	belowReads, belowWrites int32 // holds strictly below, by mode
	belowDelays             int32 // delayed nodes strictly below
}

// siblings is an intrusive list of sibling nodes in creation order. The order
// is part of the state: Export walks it, so no export has to sort names.
type siblings struct{ first, last *node }

func (l *siblings) add(n *node) {
	n.prev = l.last
	if l.last == nil {
		l.first = n
	} else {
		l.last.next = n
	}
	l.last = n
}

func (l *siblings) remove(n *node) {
	if n.prev == nil {
		l.first = n.next
	} else {
		n.prev.next = n.next
	}
	if n.next == nil {
		l.last = n.prev
	} else {
		n.next.prev = n.prev
	}
	n.prev, n.next = nil, nil
}

// waitQueue holds a node's waiter lists.
type waitQueue struct {
	here, hereWrites   waitList // waiters on this name (all / write)
	below, belowWrites waitList // waiters strictly below (all / write)
	upgrades           waitList // waiters on this name whose session already holds it
}

// emptyQueue stands in for a node without waiters; it is only ever read.
var emptyQueue waitQueue

// queue returns n's waiter lists for reading.
func (n *node) queue() *waitQueue {
	if n.waiting == nil {
		return &emptyQueue
	}
	return n.waiting
}

// queueForAdd returns n's waiter lists for queueing, making them on first use.
func (n *node) queueForAdd() *waitQueue {
	if n.waiting == nil {
		n.waiting = new(waitQueue)
	}
	return n.waiting
}

func (n *node) inUse() bool { return len(n.holds) > 0 || (n.waiting != nil && n.waiting.here.size > 0) }

// limitFor is the semaphore size a spec would see on n.
func (n *node) limitFor(spec LockSpec) int {
	if n.inUse() {
		return n.limit
	}
	return max(spec.Limit, 1)
}

// hold is one session's grant on one name. Reentrant grants raise count.
type hold struct {
	s       *session
	n       *node // nil once released
	mode    Mode
	weight  int
	count   int
	token   uint64
	expires int64  // hold_ttl end on the table clock; 0 = never
	granted uint64 // index of the grant that set token
	value   string // what the holder says about itself (LockSpec.Value, Proclaim)
}

type session struct {
	id         SessionID
	name       string
	ttl        time.Duration
	onDeadlock OnDeadlock
	ordered    bool
	lockDelay  time.Duration

	key     string       // public id; "" for a session created before keys (its key is its id in decimal)
	owner   string       // id of the ACL token that created it; "" without ACLs
	revoked []Revocation // the latest holds an operator revoked, oldest first, at most RevocationsKept

	holds   map[*node]*hold
	pending []*request // seq order
	done    []*request // finished, oldest first, at most DoneRequestsKept
}

type request struct {
	id       string
	s        *session
	seq      uint64
	specs    []LockSpec
	require  quorum.Requirement
	need     int
	holdTTL  time.Duration
	deadline int64 // wait deadline; 0 = waits until granted or cancelled
	restore  int   // >0: a surrendered hold queued again; its count on regrant

	status  Status
	token   uint64
	granted []Grant
	created uint64
	ended   uint64

	waiters []*waiter // while pending, one per spec
	queued  bool      // in the candidate queue of the current settle
	sameID  *request  // the next request of another session with the same id (requestIndex)
}

// New returns an empty table.
func New() *Table {
	return &Table{
		sessions: make(map[SessionID]*session),
		byKey:    make(map[string]*session),
		nodes:    make(map[string]*node),
		requests: newRequestIndex(0),
	}
}

// Index returns the index of the last applied entry.
func (t *Table) Index() uint64 { return t.index }

// Clock returns the table clock: the largest Now of any applied entry.
func (t *Table) Clock() int64 { return t.clock }

// Apply applies one committed entry. Entries must come with increasing
// indexes; one that does not is refused and changes nothing. A command
// whose content is bad (Command.Validate) or that the table's state refuses
// returns Result.Err and changes nothing beyond the clock, which every
// entry advances (and with it the deadlines that fire).
func (t *Table) Apply(e Entry) Result {
	if e.Index <= t.index {
		return Result{Err: errorf(CodeInvalid, "entry index %d is not after applied index %d", e.Index, t.index)}
	}
	t.index = e.Index
	if e.Now > t.clock {
		t.clock = e.Now
	}
	t.fireDeadlines()

	var res Result
	if e.Cmd == nil {
		res.Err = errorf(CodeInvalid, "empty command")
	} else if res.Err = e.Cmd.Validate(); res.Err == nil {
		res = e.Cmd.apply(t)
	}
	t.settle()
	t.recheck()
	t.collect()
	t.trimDeadlines()
	if len(t.events) > t.eventsStart {
		res.Events = t.events[t.eventsStart:len(t.events):len(t.events)]
	}
	if cap(t.events)-len(t.events) < 4 {
		t.events = make([]Event, 0, 256)
	}
	t.eventsStart = len(t.events)
	return res
}

func (t *Table) emit(kind EventKind, s *session, reqID, name string, token uint64) {
	t.counters.count(kind)
	t.events = append(t.events, Event{Kind: kind, Session: s.id, Key: s.key, RequestID: reqID, Name: name, Token: token})
}

// touch records that n's queue changed in this entry.
func (t *Table) touch(n *node) {
	if n.version != t.index {
		n.version = t.index
		t.touched = append(t.touched, n)
	}
}

// ensure returns the node for name, creating it and its ancestors.
func (t *Table) ensure(name string) *node {
	if n := t.nodes[name]; n != nil {
		return n
	}
	var parent *node
	if p := parentName(name); p != "" {
		parent = t.ensure(p)
	}
	n := &node{name: name, parent: parent, version: t.index}
	t.touched = append(t.touched, n)
	t.nodes[name] = n
	if parent != nil {
		parent.children.add(n)
	} else {
		t.roots.add(n)
	}
	return n
}

// collect removes the nodes this entry touched that no longer hold anything.
func (t *Table) collect() {
	for _, n := range t.touched {
		for n != nil && t.nodes[n.name] == n && !n.inUse() && n.children.first == nil && n.delayUntil == 0 && n.queue().upgrades.size == 0 {
			t.forgotten = t.index
			n = t.unlink(n)
		}
	}
	t.touched = t.touched[:0]
}

// unlink removes n, which holds nothing, from the table and returns its
// parent.
func (t *Table) unlink(n *node) *node {
	delete(t.nodes, n.name)
	p := n.parent
	if p != nil {
		p.children.remove(n)
	} else {
		t.roots.remove(n)
	}
	return p
}

// unmake removes the nodes ensure made since t.touched had mark entries,
// newest first, as if they had never been: for a request refused after it
// looked at its names. They hold nothing and nobody saw them.
func (t *Table) unmake(mark int) {
	for i := len(t.touched) - 1; i >= mark; i-- {
		t.unlink(t.touched[i])
	}
	t.touched = t.touched[:mark]
}

// ---- grants ---------------------------------------------------------------

// holdConflict reports whether a grant of mode m (weight w) on n to s would
// conflict with another session's hold on n, an ancestor or a descendant,
// or with a lock-delay there. s's own holds never conflict with it.
func (t *Table) holdConflict(s *session, n *node, mode Mode, weight int) bool {
	readers, writers, writeWeight := n.readers, n.writers, int(n.weight)
	if own := s.holds[n]; own != nil {
		if own.mode == Read {
			readers--
		} else {
			writers--
			writeWeight -= own.weight
		}
	}
	if mode == Read {
		if writers > 0 {
			return true
		}
	} else if readers > 0 || (writers > 0 && (n.limit <= 1 || writeWeight+weight > n.limit)) {
		return true
	}
	if n.delayUntil != 0 || n.belowDelays > 0 {
		return true
	}
	for a := n.parent; a != nil; a = a.parent {
		ancestorReaders, ancestorWriters := a.readers, a.writers
		if own := s.holds[a]; own != nil {
			if own.mode == Read {
				ancestorReaders--
			} else {
				ancestorWriters--
			}
		}
		if ancestorWriters > 0 || (mode == Write && ancestorReaders > 0) || a.delayUntil != 0 {
			return true
		}
	}
	if n.belowWrites > 0 || (mode == Write && n.belowReads > 0) {
		belowReaders, belowWriters := n.belowReads, n.belowWrites
		for held, h := range s.holds { // counting only: map order cannot leak
			if held != n && covers(n.name, held.name) {
				if h.mode == Read {
					belowReaders--
				} else {
					belowWriters--
				}
			}
		}
		if belowWriters > 0 || (mode == Write && belowReaders > 0) {
			return true
		}
	}
	return false
}

// waitConflict reports whether a waiter that arrived before seq conflicts
// with mode m on n, an ancestor or a descendant. The session's own earlier
// requests count too: a session's requests are served in its own order.
func waitConflict(n *node, mode Mode, seq uint64) bool {
	if q := n.queue(); earlier(&q.here, &q.hereWrites, mode, seq) || earlier(&q.below, &q.belowWrites, mode, seq) {
		return true
	}
	for a := n.parent; a != nil; a = a.parent {
		if q := a.queue(); earlier(&q.here, &q.hereWrites, mode, seq) {
			return true
		}
	}
	return false
}

// grantable reports whether spec i of r could be granted now. held says the
// session held the name when the request arrived: a reentrant request is
// granted at once, an upgrade waits only for other holders (the holder
// stands ahead of every waiter in the queue).
func (t *Table) grantable(r *request, i int, n *node, held bool) bool {
	sp := r.specs[i]
	if held {
		if own := r.s.holds[n]; own != nil {
			if own.mode >= sp.Mode && own.weight >= sp.Weight {
				return true
			}
		} else {
			held = false
		}
	}
	if t.holdConflict(r.s, n, sp.Mode, sp.Weight) {
		return false
	}
	return held || !waitConflict(n, sp.Mode, r.seq)
}

// choose returns the specs of a pending r to grant now, or nil. buf is
// scratch space for the answer.
func (t *Table) choose(r *request, buf []int) []int {
	var canGrantBuf [8]bool // most requests name few locks: no allocation
	canGrant := canGrantBuf[:0]
	for i, w := range r.waiters {
		g := t.grantable(r, i, w.n, w.upgrade)
		if !g && r.need == len(r.specs) {
			return nil
		}
		canGrant = append(canGrant, g)
	}
	return quorum.AppendPick(buf, r.need, canGrant)
}

// grant gives r the chosen specs at this entry's index and finishes it.
func (t *Table) grant(r *request, chosen []int) {
	if r.created != t.index {
		t.counters.Handoffs += uint64(len(chosen))
	}
	// A queued request keeps the limit its names had while it waited
	// (unqueueing the last waiter would otherwise forget it).
	var limBuf [8]int
	limits := limBuf[:0]
	for _, w := range r.waiters {
		limits = append(limits, w.n.limit)
	}
	t.unqueue(r)
	s := r.s
	for _, i := range chosen {
		sp := r.specs[i]
		n := t.ensure(sp.Name)
		if !n.inUse() {
			n.limit = max(sp.Limit, 1)
			if i < len(limits) { // it was queued: keep the limit it queued under
				n.limit = max(n.limit, limits[i])
			}
		}
		h := s.holds[n]
		isNew := h == nil
		if isNew {
			h = &hold{s: s, n: n, mode: sp.Mode, weight: sp.Weight, count: max(r.restore, 1), token: t.index, granted: t.index,
				value: sp.Value}
			t.addHold(h)
		} else if sp.Mode > h.mode || sp.Weight > h.weight {
			t.upgradeHold(h, sp.Mode, sp.Weight)
			h.count++
			h.token, h.granted = t.index, t.index
		} else {
			h.count++
		}
		if !isNew && sp.Value != "" { // a reentrant grant or an upgrade keeps the value it does not replace
			h.value = sp.Value
		}
		// The hold lasts as long as its longest-lived grant: a grant without
		// hold_ttl keeps it until released.
		switch {
		case r.holdTTL == 0:
			h.expires = 0
		case isNew || h.expires != 0:
			if exp := t.clock + int64(r.holdTTL); exp > h.expires {
				h.expires = exp
				t.addDeadline(&deadline{at: exp, kind: dlHold, name: n.name, sess: s.id, h: h})
			}
		}
		t.touch(n)
		r.granted = append(r.granted, Grant{Name: sp.Name, Mode: h.mode, Weight: h.weight, Token: h.token})
		r.token = max(r.token, h.token)
		t.emit(EvGranted, s, r.id, sp.Name, h.token)
	}
	t.finish(r, Granted)
	// A grant can only block others, except that the session's own queued
	// requests may now be reentrant: look at them again.
	for _, p := range s.pending {
		t.candidates.add(p)
	}
}

// addHold adds a new hold, and marks the sessions it may give new
// wait-for edges (see suspect).
func (t *Table) addHold(h *hold) {
	n := h.n
	n.holds = append(n.holds, h)
	h.s.holds[n] = h
	t.countHold(h, +1)
	t.suspectNewEdges(n)
}

// upgradeHold raises h to at least mode and weight. That changes what the
// hold conflicts with: on a semaphore a read turned write may admit write
// waiters, and waiters it overtook now wait for it (see suspect).
func (t *Table) upgradeHold(h *hold, mode Mode, weight int) {
	t.countHold(h, -1)
	h.mode, h.weight = max(h.mode, mode), max(h.weight, weight)
	t.countHold(h, +1)
	t.wake(h.n)
	t.suspect(h.s)
	t.suspectNewEdges(h.n)
}

// countHold adds (d=+1) or removes (d=-1) h from the aggregate counts.
func (t *Table) countHold(h *hold, d int32) {
	n := h.n
	if h.mode == Read {
		n.readers += d
		for a := n.parent; a != nil; a = a.parent {
			a.belowReads += d
		}
	} else {
		n.writers += d
		n.weight += d * int32(h.weight)
		for a := n.parent; a != nil; a = a.parent {
			a.belowWrites += d
		}
	}
}

// dropHold removes h entirely (all its counts) and wakes whoever it blocked.
func (t *Table) dropHold(h *hold, kind EventKind) {
	n, s := h.n, h.s
	t.countHold(h, -1)
	for i, x := range n.holds {
		if x == h {
			n.holds = append(n.holds[:i], n.holds[i+1:]...)
			break
		}
	}
	delete(s.holds, n)
	h.n = nil
	if !n.inUse() {
		n.limit = 0
	}
	// The session's own upgrades queued on n now wait for earlier waiters
	// too (see suspect).
	for e := n.queue().upgrades.head; e != nil; e = e.next {
		if e.w.req.s == s {
			t.suspect(s)
			break
		}
	}
	t.touch(n)
	t.emit(kind, s, "", n.name, h.token)
	t.wake(n)
}

// ---- queues ---------------------------------------------------------------

// enqueue puts a pending r on the queues of all its names. It does not
// touch their versions: the caller does once r is known to stay queued.
func (t *Table) enqueue(r *request) {
	upgrades := make([]bool, len(r.specs))
	for i, sp := range r.specs {
		n := t.ensure(sp.Name)
		upgrades[i] = r.s.holds[n] != nil
	}
	t.enqueueAs(r, upgrades, true)
}

// enqueueAs queues r with the given upgrade flags. On load (setLimits
// false) the nodes already carry their recorded limits.
func (t *Table) enqueueAs(r *request, upgrades []bool, setLimits bool) {
	r.waiters = make([]*waiter, len(r.specs))
	for i, sp := range r.specs {
		n := t.ensure(sp.Name)
		if setLimits && !n.inUse() {
			n.limit = max(sp.Limit, 1)
		}
		w := &waiter{req: r, spec: i, n: n, mode: sp.Mode, upgrade: upgrades[i]}
		w.elems = make([]*elem, 0, 4)
		q := n.queueForAdd()
		q.here.push(w)
		if w.mode == Write {
			q.hereWrites.push(w)
		}
		if w.upgrade {
			q.upgrades.push(w)
			t.queuedUpgrades++
		}
		for a := n.parent; a != nil; a = a.parent {
			aq := a.queueForAdd()
			aq.below.push(w)
			if w.mode == Write {
				aq.belowWrites.push(w)
			}
		}
		r.waiters[i] = w
	}
	t.waiting++
	t.own(r.s.owner, 0, 1)
	r.s.pending = append(r.s.pending, r)
	t.justQueued = append(t.justQueued, r)
}

// unqueue takes a request off every queue and wakes what it was blocking.
// A request queued by this same entry was never seen in its queues, so
// taking it off again is no change to them.
func (t *Table) unqueue(r *request) {
	if r.waiters != nil {
		t.waiting--
		t.own(r.s.owner, 0, -1)
	}
	for _, w := range r.waiters {
		for _, e := range w.elems {
			e.list.remove(e)
		}
		w.elems = nil
		if w.upgrade {
			t.queuedUpgrades--
		}
		if !w.n.inUse() {
			w.n.limit = 0
		}
		if r.created != t.index {
			t.touch(w.n)
		}
	}
	for _, w := range r.waiters {
		t.wake(w.n)
	}
	r.waiters = nil
	p := r.s.pending
	for i, x := range p {
		if x == r {
			r.s.pending = append(p[:i], p[i+1:]...)
			break
		}
	}
}

// wake queues for re-evaluation every waiter that a change at n may have
// unblocked: waiters on n and its ancestors (up to and including the first
// write waiter of each queue: everyone after it waits for it), their
// upgrades, and every waiter below n.
func (t *Table) wake(n *node) {
	for a := n; a != nil; a = a.parent {
		q := a.queue()
		for e := q.here.head; e != nil; e = e.next {
			t.work++
			t.candidates.add(e.w.req)
			if e.w.mode == Write {
				break
			}
		}
		for e := q.upgrades.head; e != nil; e = e.next {
			t.work++
			t.candidates.add(e.w.req)
		}
	}
	for e := n.queue().below.head; e != nil; e = e.next {
		t.work++
		t.candidates.add(e.w.req)
	}
}

// settle grants, in arrival order, every queued candidate that can be.
func (t *Table) settle() {
	for t.candidates.Len() > 0 {
		r := heap.Pop(&t.candidates).(*request)
		r.queued = false
		t.work++
		if r.status != Pending {
			continue
		}
		var buf [8]int
		if chosen := t.choose(r, buf[:0]); chosen != nil {
			t.grant(r, chosen)
		}
	}
}

// fail ends a pending r with a final status other than granted.
func (t *Table) fail(r *request, st Status, kind EventKind) {
	t.unqueue(r)
	t.finish(r, st)
	t.emit(kind, r.s, r.id, "", 0)
}

// finish records r's outcome and remembers it for idempotent retries.
func (t *Table) finish(r *request, st Status) {
	r.status, r.ended = st, t.index
	s := r.s
	s.done = append(s.done, r)
	if len(s.done) > DoneRequestsKept {
		old := s.done[0]
		s.done = s.done[1:]
		t.requests.remove(old)
	}
}

// candidateQueue orders candidate requests by arrival.
type candidateQueue []*request

func (q candidateQueue) Len() int           { return len(q) }
func (q candidateQueue) Less(i, j int) bool { return q[i].seq < q[j].seq }
func (q candidateQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *candidateQueue) Push(x any)        { *q = append(*q, x.(*request)) }
func (q *candidateQueue) Pop() any {
	old := *q
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return r
}

func (q *candidateQueue) add(r *request) {
	if !r.queued && r.status == Pending {
		r.queued = true
		heap.Push(q, r)
	}
}

func (r *request) String() string { return fmt.Sprintf("request %s (seq %d)", r.id, r.seq) }
