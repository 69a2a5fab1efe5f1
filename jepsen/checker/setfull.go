package checker

import (
	"sort"

	"github.com/lockd/lockd/jepsen/history"
)

// SetFull is Jepsen's set-full over the lock-guarded registers: every
// acknowledged element (res-write ok) must be in the final read of its
// register exactly once. An element present but never acknowledged is
// "recovered" when its write's outcome was unknown, and a violation when
// its write was rejected or never attempted. Without a final-read event
// the verdict is Unknown.
func SetFull(events []history.Event, cfg Config) Result {
	r := newResult("set-full")
	writes := elementWrites(events, &r)
	final := lastFinalRead(events)
	if final == nil {
		r.Verdict = Unknown
		r.Note = "no final read"
		return r
	}
	present := map[element]int{}
	for name, vs := range final.Values {
		for _, v := range vs {
			present[element{name, v}]++
		}
	}
	for _, k := range sortedElements(writes, present) {
		judgeElement(k, writes[k], present[k], cfg, &r)
	}
	return r
}

// element is a value written to a register.
type element struct {
	name string
	v    int64
}

// writeStatus is the strongest outcome of an element's writes; the zero
// value: never written.
type writeStatus int

const (
	writeUnknown writeStatus = iota + 1
	writeRejected
	writeAcked
)

// elementWrite is what became of an element's writes.
type elementWrite struct {
	status writeStatus
	idx    int // history index of the write's invoke
}

// elementWrites returns, per element, its strongest write outcome (if a
// value was written twice), and counts the outcomes.
func elementWrites(events []history.Event, r *Result) map[element]elementWrite {
	out := map[element]elementWrite{}
	for _, o := range ops(events) {
		if o.inv.F != history.ResWrite {
			continue
		}
		gs := o.granted()
		if len(gs) == 0 {
			continue
		}
		k := element{gs[0].Name, o.value()}
		r.Counts["attempted"]++
		s := writeUnknown
		switch o.typ() {
		case history.OK:
			s = writeAcked
			r.Counts["acknowledged"]++
		case history.Fail:
			s = writeRejected
			if o.errString() == "stale" {
				r.Counts["stale-rejected"]++
			} else {
				r.Counts["failed-other"]++
			}
		default:
			r.Counts["indeterminate"]++
		}
		if s > out[k].status {
			out[k] = elementWrite{status: s, idx: o.inv.Index}
		}
	}
	return out
}

// lastFinalRead returns the last ok final read, or nil.
func lastFinalRead(events []history.Event) *history.Event {
	var final *history.Event
	for i := range events {
		e := &events[i]
		if e.F == history.FinalRead && e.Type == history.OK {
			final = e
		}
	}
	return final
}

// sortedElements returns the elements written or present, by register
// and value.
func sortedElements(writes map[element]elementWrite, present map[element]int) []element {
	keys := make([]element, 0, len(writes))
	for k := range writes {
		keys = append(keys, k)
	}
	for k := range present {
		if writes[k].status == 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].name != keys[j].name {
			return keys[i].name < keys[j].name
		}
		return keys[i].v < keys[j].v
	})
	return keys
}

// judgeElement judges one element present n times in the final read.
func judgeElement(k element, w elementWrite, n int, cfg Config, r *Result) {
	if n > 1 {
		r.Counts["duplicated"]++
		r.anomaly(cfg, "element %d of %q is in the final read %d times", k.v, k.name, n)
	}
	switch w.status {
	case writeAcked:
		if n == 0 {
			r.Counts["lost"]++
			r.anomaly(cfg, "acknowledged element %d of %q (write invoked at event %d) is missing from the final read", k.v, k.name, w.idx)
		} else {
			r.Counts["ok"]++
		}
	case writeUnknown:
		if n > 0 {
			r.Counts["recovered"]++
		}
	case writeRejected:
		if n > 0 {
			r.Counts["rejected-present"]++
			r.anomaly(cfg, "element %d of %q was rejected (event %d) yet is in the final read", k.v, k.name, w.idx)
		}
	default:
		r.Counts["unexpected"]++
		r.anomaly(cfg, "element %d of %q was never written yet is in the final read", k.v, k.name)
	}
}
