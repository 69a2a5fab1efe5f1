package lockstate

import (
	"fmt"
	"testing"
	"time"
)

// benchTable drives a table without a testing.T driver's log, so the
// benchmark measures Apply and nothing else.
type benchTable struct {
	tab   *Table
	index uint64
	now   int64
}

func (b *benchTable) apply(cmd Command) Result {
	b.index++
	return b.tab.Apply(Entry{Index: b.index, Now: b.now, Cmd: cmd})
}

func (b *benchTable) session() SessionID {
	return b.apply(&CreateSession{TTL: time.Minute}).Session
}

// BenchmarkAcquireRelease: uncontended acquire + release on distinct names.
func BenchmarkAcquireRelease(b *testing.B) {
	bt := &benchTable{tab: New()}
	s := bt.session()
	// Another lock under bench/ keeps the parent name alive, as in any
	// table with more than one lock under a prefix.
	bt.apply(&Acquire{Session: s, Locks: []LockSpec{{Name: "bench/keep", Mode: Write}}})
	names := make([]string, 1024)
	for i := range names {
		names[i] = fmt.Sprintf("bench/lock-%d", i)
	}
	acq := make([]*Acquire, len(names))
	rel := make([]*Release, len(names))
	for i, n := range names {
		acq[i] = &Acquire{Session: s, RequestID: "", Locks: []LockSpec{{Name: n, Mode: Write}}}
		rel[i] = &Release{Session: s, Name: n}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(names)
		if r := bt.apply(acq[j]); r.Err != nil || r.Request.Status != Granted {
			b.Fatal(r.Err)
		}
		if r := bt.apply(rel[j]); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkHandoff: a release that wakes one waiter (and the re-queue of
// the releaser behind it), with 0 or 100,000 unrelated locks and waiters in
// the table. The cost must not depend on the unrelated ones.
func BenchmarkHandoff(b *testing.B) {
	for _, unrelated := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("unrelated=%d", unrelated), func(b *testing.B) {
			bt := &benchTable{tab: New()}
			holders := make([]SessionID, 100)
			waiters := make([]SessionID, 100)
			for i := range holders {
				holders[i], waiters[i] = bt.session(), bt.session()
			}
			// unrelated/2 held locks, each with one waiter: unrelated entries.
			for i := 0; i < unrelated/2; i++ {
				name := fmt.Sprintf("other/%d/lock-%d", i%100, i)
				bt.apply(&Acquire{Session: holders[i%100], Locks: []LockSpec{{Name: name, Mode: Write}}})
				if r := bt.apply(&Acquire{Session: waiters[i%100], Locks: []LockSpec{{Name: name, Mode: Write}}, Wait: time.Hour}); r.Request.Status != Pending {
					b.Fatalf("setup: %s", r.Request.Status)
				}
			}
			x, y := bt.session(), bt.session()
			spec := []LockSpec{{Name: "hot/lock", Mode: Write}}
			bt.apply(&Acquire{Session: x, Locks: spec})
			bt.apply(&Acquire{Session: y, Locks: spec, Wait: time.Hour})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if r := bt.apply(&Release{Session: x, Name: "hot/lock"}); len(r.Events) != 2 {
					b.Fatalf("release woke %+v", r.Events)
				}
				if r := bt.apply(&Acquire{Session: x, Locks: spec, Wait: time.Hour}); r.Request.Status != Pending {
					b.Fatal("re-queue")
				}
				x, y = y, x
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "handoffs/s")
		})
	}
}

// TestHandoffWorkIndependentOfTableSize is the deterministic side of
// BenchmarkHandoff: the waiter-list steps and candidate evaluations of a
// release that wakes one waiter are the same with 0 or 10,000 unrelated
// locks and waiters in the table. (Wall time on a shared machine also moves
// with cache and GC effects; the work must not.)
func TestHandoffWorkIndependentOfTableSize(t *testing.T) {
	work := func(unrelated int) uint64 {
		bt := &benchTable{tab: New()}
		hs, ws := bt.session(), bt.session()
		for i := 0; i < unrelated/2; i++ {
			name := fmt.Sprintf("other/%d/lock-%d", i%100, i)
			bt.apply(&Acquire{Session: hs, Locks: []LockSpec{{Name: name, Mode: Write}}})
			bt.apply(&Acquire{Session: ws, Locks: []LockSpec{{Name: name, Mode: Write}}, Wait: time.Hour})
		}
		x, y := bt.session(), bt.session()
		spec := []LockSpec{{Name: "hot/lock", Mode: Write}}
		bt.apply(&Acquire{Session: x, Locks: spec})
		bt.apply(&Acquire{Session: y, Locks: spec, Wait: time.Hour})
		before := bt.tab.work
		if r := bt.apply(&Release{Session: x, Name: "hot/lock"}); len(r.Events) != 2 {
			t.Fatalf("release woke %+v", r.Events)
		}
		return bt.tab.work - before
	}
	w0, w1 := work(0), work(10_000)
	if w0 != w1 || w0 == 0 {
		t.Fatalf("handoff work: %d with an empty table, %d with 10,000 unrelated entries", w0, w1)
	}
}
