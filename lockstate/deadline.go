package lockstate

import "container/heap"

const (
	dlHold  = iota // a hold's hold_ttl runs out
	dlDelay        // a node's lock-delay ends
	dlWait         // a pending request's wait runs out
)

// deadline is one timed event. Entries are never removed early: one that no
// longer matches its target is skipped when it comes up. Ties are broken on
// a canonical key (kind, name, session, seq) rather than on push order, so a
// table rebuilt from a snapshot fires deadlines in exactly the same order.
type deadline struct {
	at   int64
	kind uint8
	name string
	sess SessionID
	seq  uint64
	h    *hold
	n    *node
	r    *request
}

func (a *deadline) less(b *deadline) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	if a.name != b.name {
		return a.name < b.name
	}
	if a.sess != b.sess {
		return a.sess < b.sess
	}
	return a.seq < b.seq
}

func (d *deadline) live() bool {
	switch d.kind {
	case dlHold:
		return d.h.n != nil && d.h.expires == d.at
	case dlDelay:
		return d.n.delayUntil == d.at
	default:
		return d.r.status == Pending && d.r.deadline == d.at
	}
}

type deadlines []*deadline

func (q deadlines) Len() int           { return len(q) }
func (q deadlines) Less(i, j int) bool { return q[i].less(q[j]) }
func (q deadlines) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *deadlines) Push(x any)        { *q = append(*q, x.(*deadline)) }
func (q *deadlines) Pop() any {
	old := *q
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return d
}

func (t *Table) addDeadline(d *deadline) { heap.Push(&t.deadlines, d) }

// fireDeadlines runs every live deadline at or before the clock, in order.
func (t *Table) fireDeadlines() {
	for len(t.deadlines) > 0 && t.deadlines[0].at <= t.clock {
		d := heap.Pop(&t.deadlines).(*deadline)
		if !d.live() {
			continue
		}
		switch d.kind {
		case dlHold:
			t.dropHold(d.h, EvExpired)
		case dlDelay:
			t.clearDelay(d.n)
		case dlWait:
			t.fail(d.r, TimedOut, EvTimeout)
		}
		t.settle() // grants made possible by this deadline happen before the next one fires
	}
}

// trimDeadlines drops dead entries from the top so NextDeadline is exact.
func (t *Table) trimDeadlines() {
	for len(t.deadlines) > 0 && !t.deadlines[0].live() {
		heap.Pop(&t.deadlines)
	}
}

// Tick only advances the clock, so that hold TTLs, lock-delays and wait
// deadlines fire when no other command arrives.
type Tick struct{}

// Validate accepts every Tick.
func (*Tick) Validate() *Error { return nil }

// apply does nothing: Apply has already moved the clock and fired what
// was due.
func (*Tick) apply(*Table) Result { return Result{} }

// NextDeadline returns the table-clock time at which the next hold TTL,
// lock-delay or wait deadline fires. The leader proposes a Tick once its
// wall clock passes it.
func (t *Table) NextDeadline() (int64, bool) {
	if len(t.deadlines) == 0 {
		return 0, false
	}
	return t.deadlines[0].at, true
}
