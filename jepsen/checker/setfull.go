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
	type key struct {
		name string
		v    int64
	}
	const (
		unknown = iota + 1
		rejected
		acked
	)
	status := map[key]int{}
	idx := map[key]int{}
	for _, o := range ops(events) {
		if o.inv.F != history.ResWrite {
			continue
		}
		gs := o.granted()
		if len(gs) == 0 {
			continue
		}
		k := key{gs[0].Name, o.value()}
		r.Counts["attempted"]++
		s := unknown
		switch o.typ() {
		case history.OK:
			s = acked
			r.Counts["acknowledged"]++
		case history.Fail:
			s = rejected
			if o.errString() == "stale" {
				r.Counts["stale-rejected"]++
			} else {
				r.Counts["failed-other"]++
			}
		default:
			r.Counts["indeterminate"]++
		}
		// The strongest outcome wins if a value was written twice.
		if s > status[k] {
			status[k] = s
			idx[k] = o.inv.Index
		}
	}
	var final *history.Event
	for i := range events {
		e := &events[i]
		if e.F == history.FinalRead && e.Type == history.OK {
			final = e
		}
	}
	if final == nil {
		r.Verdict = Unknown
		r.Note = "no final read"
		return r
	}
	present := map[key]int{}
	for name, vs := range final.Values {
		for _, v := range vs {
			present[key{name, v}]++
		}
	}
	keys := make([]key, 0, len(status))
	for k := range status {
		keys = append(keys, k)
	}
	for k := range present {
		if status[k] == 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].name != keys[j].name {
			return keys[i].name < keys[j].name
		}
		return keys[i].v < keys[j].v
	})
	for _, k := range keys {
		n := present[k]
		if n > 1 {
			r.Counts["duplicated"]++
			r.anomaly(cfg, "element %d of %q is in the final read %d times", k.v, k.name, n)
		}
		switch status[k] {
		case acked:
			if n == 0 {
				r.Counts["lost"]++
				r.anomaly(cfg, "acknowledged element %d of %q (write invoked at event %d) is missing from the final read", k.v, k.name, idx[k])
			} else {
				r.Counts["ok"]++
			}
		case unknown:
			if n > 0 {
				r.Counts["recovered"]++
			}
		case rejected:
			if n > 0 {
				r.Counts["rejected-present"]++
				r.anomaly(cfg, "element %d of %q was rejected (event %d) yet is in the final read", k.v, k.name, idx[k])
			}
		default:
			r.Counts["unexpected"]++
			r.anomaly(cfg, "element %d of %q was never written yet is in the final read", k.v, k.name)
		}
	}
	return r
}
