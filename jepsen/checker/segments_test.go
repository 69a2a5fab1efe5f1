package checker

import (
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// segmentsOf cuts h's lock operations wherever the rules allow.
func segmentsOf(h *hb) map[int][]LockInput {
	ops, _ := segmentOperations(LockOperations(h.ev, Config{}), 1)
	out := map[int][]LockInput{}
	for _, o := range ops {
		in := o.Input.(LockInput)
		out[in.Part] = append(out[in.Part], in)
	}
	return out
}

func TestSegmentCuts(t *testing.T) {
	tests := []struct {
		name  string
		build func(h *hb)
		want  int // segments
	}{
		{"after each release: the table is empty", func(h *hb) {
			h.lock(1, "a", 1)
			h.release(1, "a") // cut
			h.lock(2, "a", 2)
			h.release(2, "a") // cut
			h.lock(3, "a", 3)
		}, 3},
		{"never while a grant is held", func(h *hb) {
			h.lock(1, "a", 1)
			h.lock(2, "b", 2) // one partition with a: no, b is a partition of its own
			h.observe(9, "a", held(1, "write", 1))
			h.observe(9, "a", held(1, "write", 1))
		}, 2}, // the two partitions, uncut
		{"never after an acquire of unknown outcome, until an ok close", func(h *hb) {
			h.acquire(1, wl("a"))
			h.done(1, history.Acquire, history.Info, "timeout")
			h.lock(2, "a", 2)
			h.release(2, "a")
			h.close(1, history.OK)
			h.lock(3, "a", 3)
			h.release(3, "a")
		}, 2},
		{"an acquire in flight moves into the next segment", func(h *hb) {
			h.lock(1, "a", 1)
			h.acquire(2, wl("a"))
			h.release(1, "a") // cut
			h.granted(2, wg("a", 2))
			h.release(2, "a") // cut
			h.lock(3, "a", 3)
		}, 3},
		{"not while an acquire moved at the last cut is still in flight", func(h *hb) {
			h.lock(1, "a", 1)
			h.acquire(2, wl("a"))
			h.release(1, "a") // cut
			h.lock(3, "a", 2)
			h.release(3, "a") // no cut: p2's acquire would move twice
			h.granted(2, wg("a", 3))
			h.release(2, "a") // cut
			h.lock(4, "a", 4)
		}, 3},
		{"not after an observe that returned while an acquire was in flight", func(h *hb) {
			h.lock(1, "a", 1)
			h.acquire(2, wl("a"))
			h.observe(9, "a", held(1, "write", 1))
			h.release(1, "a") // no cut: the observe might have seen p2
			h.granted(2, wg("a", 2))
			h.release(2, "a") // cut
			h.lock(3, "a", 3)
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &hb{}
			tt.build(h)
			if got := segmentsOf(h); len(got) != tt.want {
				t.Fatalf("%d segments, want %d: %v", len(got), tt.want, got)
			}
		})
	}
}

// The acquire in flight at a cut is checked in the next segment, from
// the cut on, after a token floor from the grants that returned before
// it was called.
func TestSegmentMovesAnAcquireInFlight(t *testing.T) {
	h := &hb{}
	h.lock(1, "a", 7)
	h.acquire(2, wl("a"))
	h.release(1, "a") // cut
	h.granted(2, wg("a", 8))
	ops, n := segmentOperations(LockOperations(h.ev, Config{}), 1)
	if n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	var floor, grant int
	for i, o := range ops {
		in := o.Input.(LockInput)
		switch {
		case in.Kind == kindTokenFloor && in.Part == 1:
			floor = i
			if g := o.Output.(LockOutput).Granted; len(g) != 1 || g[0].Token != 7 {
				t.Fatalf("floor %v, want a=7", g)
			}
		case in.Kind == history.Acquire && in.Process == 2:
			grant = i
			if in.Part != 1 || o.Call <= ops[floor].Return {
				t.Fatalf("p2's acquire in segment %d called at %d, floor returned at %d", in.Part, o.Call, ops[floor].Return)
			}
		}
	}
	if floor == 0 || grant == 0 {
		t.Fatalf("no floor or no grant in %v", ops)
	}
}

// Histories a review found judged wrongly once cut (each valid or
// invalid as a whole; cut wherever the rules allow, the verdict must
// not change).
func TestSegmentsKeepTheVerdict(t *testing.T) {
	ttlAcquire := func(h *hb, p int, name string, tok uint64) {
		h.add(history.Event{Type: history.Invoke, Process: p, F: history.Acquire, Locks: []history.Lock{wl(name)}, HoldTTL: time.Microsecond})
		h.add(history.Event{Type: history.OK, Process: p, F: history.Acquire, Granted: []history.Granted{wg(name, tok)}, Token: tok, HoldTTL: time.Microsecond})
	}
	tests := []struct {
		name  string
		build func(h *hb)
	}{
		{"an acquire of unknown outcome chose its lock by a hold moved past the cut", func(h *hb) {
			h.acquire(1, wl("L"))
			h.acquireReq(2, "any", wl("L"), wl("M"))
			h.done(2, history.Acquire, history.Info, "timeout")
			h.release(2, "M") // so p2 got M: p1 had L
			h.close(2, history.OK)
			h.granted(1, wg("L", 1))
		}},
		{"a lost session ends only the grants before its window", func(h *hb) {
			h.lock(1, "a", 1)
			h.lost(1) // the model may place the loss before the grant
			h.observe(2, "a", held(1, "write", 1))
		}},
		{"an expired hold TTL ends only the grants before its window", func(h *hb) {
			ttlAcquire(h, 1, "a", 1)
			h.releaseInv(1, "a")
			h.done(1, history.Release, history.Fail, "unavailable")
			h.observe(2, "a", held(1, "write", 1))
		}},
		{"a token regression two cuts later", func(h *hb) {
			h.acquire(2, wl("a"))
			h.lock(1, "a", 5)
			h.release(1, "a") // cut: a@5 returned after p2's call
			h.done(2, history.Acquire, history.Fail, "timeout")
			h.lock(3, "a", 3) // after a@5
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &hb{}
			tt.build(h)
			whole := Linearizable(h.ev, Config{})
			defer func(n int) { minSegment = n }(minSegment)
			minSegment = 1
			if cut := Linearizable(h.ev, Config{}); cut.Verdict != whole.Verdict {
				t.Fatalf("whole %s, cut into %d segments %s: %v", whole.Verdict, cut.Counts["segments"], cut.Verdict, cut.Anomalies)
			}
		})
	}
}
