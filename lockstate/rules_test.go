package lockstate

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/quorum"
)

func TestValidName(t *testing.T) {
	long := strings.Repeat("x", MaxSegmentLen)
	deep := strings.TrimSuffix(strings.Repeat("a/", MaxSegments), "/")
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"db/orders/42", true},
		{long, true},
		{deep, true},
		{"ünïcode/ok", true},
		{"", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{long + "x", false},
		{deep + "/a", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\x7fb", false},
		{"\xff\xfe", false},
		{strings.Repeat(long+"/", 4) + "x", false}, // 517 bytes, 5 segments
	} {
		if err := ValidName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidName(%q) = %v; want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// Conflicts across the hierarchy: a lock on a name conflicts with
// conflicting locks on its ancestors and descendants, never with siblings.
func TestHierarchyConflicts(t *testing.T) {
	for _, tc := range []struct {
		held    string
		heldM   Mode
		want    string
		wantM   Mode
		granted bool
	}{
		{"a", Write, "a", Write, false},
		{"a", Write, "a/b", Read, false},
		{"a/b", Write, "a", Read, false},
		{"a/b/c", Read, "a", Write, false},
		{"a", Read, "a/b/c", Write, false},
		{"a", Read, "a/b", Read, true},
		{"a/b", Read, "a", Read, true},
		{"a/b", Write, "a/c", Write, true},
		{"a/b", Write, "a/bc", Write, true}, // a prefix of bytes is not an ancestor
		{"a/b", Write, "b", Write, true},
		{"ab", Write, "a", Write, true},
	} {
		d := newDriver(t)
		s1, s2 := d.session(), d.session()
		d.acquire(s1, tc.held, tc.heldM, 0)
		got := d.acquire(s2, tc.want, tc.wantM, 0).Status == Granted
		if got != tc.granted {
			t.Errorf("%s:%v held, %s:%v asked: granted=%v, want %v", tc.held, tc.heldM, tc.want, tc.wantM, got, tc.granted)
		}
	}
}

func TestOwnHoldsNeverConflict(t *testing.T) {
	d := newDriver(t)
	s := d.session()
	d.acquire(s, "a", Write, 0)
	for _, name := range []string{"a/b", "a/b/c"} {
		if r := d.acquire(s, name, Write, 0); r.Status != Granted {
			t.Errorf("own descendant %s: %s", name, r.Status)
		}
	}
}

func TestSemaphore(t *testing.T) {
	type step struct {
		sess   int
		weight int
		limit  int
		want   Status
		code   Code
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"weights fill the limit", []step{{0, 2, 3, Granted, ""}, {1, 1, 3, Granted, ""}, {2, 1, 3, TimedOut, ""}}},
		{"limit 0 takes the existing limit", []step{{0, 1, 3, Granted, ""}, {1, 2, 0, Granted, ""}}},
		{"multi-permit is all or nothing", []step{{0, 2, 3, Granted, ""}, {1, 2, 3, TimedOut, ""}, {2, 1, 3, Granted, ""}}},
		{"limit mismatch", []step{{0, 1, 3, Granted, ""}, {1, 1, 4, "", CodeLimitMismatch}}},
		{"weight over limit", []step{{0, 4, 3, "", CodeInvalid}}},
		{"weight over default limit", []step{{0, 2, 0, "", CodeInvalid}}},
		{"plain lock is limit 1", []step{{0, 1, 0, Granted, ""}, {1, 1, 1, TimedOut, ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			ss := []SessionID{d.session(), d.session(), d.session()}
			for i, st := range tc.steps {
				before := d.tab.Digest()
				res := d.apply(&Acquire{Session: ss[st.sess], Locks: []LockSpec{{Name: "pool", Mode: Write, Weight: st.weight, Limit: st.limit}}})
				switch {
				case st.code != "":
					if res.Err == nil || res.Err.Code != st.code {
						t.Fatalf("step %d: err %v, want %s", i, res.Err, st.code)
					}
					if d.tab.Digest() != before {
						t.Fatalf("step %d: failed command changed the table", i)
					}
				case res.Err != nil:
					t.Fatalf("step %d: %v", i, res.Err)
				case res.Request.Status != st.want:
					t.Fatalf("step %d: %s, want %s", i, res.Request.Status, st.want)
				}
			}
		})
	}
}

func TestSemaphoreReaderWriter(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	d.apply(&Acquire{Session: a, Locks: []LockSpec{{Name: "pool", Mode: Write, Limit: 3}}})
	if r := d.acquire(b, "pool", Read, 0); r.Status != TimedOut {
		t.Fatalf("read beside a semaphore write: %s", r.Status)
	}
	if r := d.acquire(b, "pool/x", Write, 0); r.Status != TimedOut {
		t.Fatalf("child of a held semaphore: %s", r.Status)
	}
}

func TestSessionIDsAreCreationIndexes(t *testing.T) {
	d := newDriver(t)
	a := d.session()
	d.advance(time.Second)
	b := d.session()
	if a != 1 || b != 3 || !(a < b) {
		t.Fatalf("ids %d, %d", a, b)
	}
}

func TestSessionOptionsValidated(t *testing.T) {
	for _, tc := range []struct {
		c  CreateSession
		ok bool
	}{
		{CreateSession{TTL: MinTTL}, true},
		{CreateSession{TTL: MaxTTL, OnDeadlock: SurrenderLock, Ordered: true, LockDelay: MaxLockDelay}, true},
		{CreateSession{TTL: MinTTL - 1}, false},
		{CreateSession{TTL: MaxTTL + 1}, false},
		{CreateSession{TTL: time.Minute, OnDeadlock: "explode"}, false},
		{CreateSession{TTL: time.Minute, LockDelay: -1}, false},
		{CreateSession{TTL: time.Minute, LockDelay: MaxLockDelay + 1}, false},
		{CreateSession{TTL: time.Minute, Name: strings.Repeat("n", MaxSessionName+1)}, false},
	} {
		d := newDriver(t)
		c := tc.c
		res := d.apply(&c)
		if (res.Err == nil) != tc.ok {
			t.Errorf("%+v: err %v, want ok=%v", tc.c, res.Err, tc.ok)
		}
		if !tc.ok && len(d.tab.Sessions()) != 0 {
			t.Errorf("%+v: refused session was created", tc.c)
		}
	}
}

func TestCloseAndExpire(t *testing.T) {
	for _, expire := range []bool{false, true} {
		d := newDriver(t)
		a := d.session(func(c *CreateSession) { c.LockDelay = 5 * time.Second })
		b, c := d.session(), d.session()
		d.acquire(a, "x", Write, 0)
		pend := d.acquire(a, "y", Write, time.Minute) // free: granted at once
		d.acquire(b, "z", Write, 0)
		q := d.acquire(a, "z", Write, time.Minute)
		w := d.acquire(c, "x", Write, time.Minute)
		if pend.Status != Granted || q.Status != Pending || w.Status != Pending {
			t.Fatalf("setup: %s %s %s", pend.Status, q.Status, w.Status)
		}
		var res Result
		if expire {
			res = d.apply(&ExpireSession{Session: a})
		} else {
			res = d.apply(&CloseSession{Session: a})
		}
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if d.tab.HasSession(a) {
			t.Fatal("session still open")
		}
		if _, ok := d.request(q.ID); ok {
			t.Error("an ended session's requests are forgotten")
		}
		if expire {
			if d.status(w.ID) != Pending {
				t.Fatal("lock-delay must hold back the waiter")
			}
			if at, ok := d.tab.NextDeadline(); !ok || at != d.now+int64(5*time.Second) {
				t.Fatalf("next deadline %v %v", at, ok)
			}
			d.advance(5*time.Second - 1)
			if d.status(w.ID) != Pending {
				t.Fatal("granted before the lock-delay ended")
			}
			d.advance(1)
		}
		if d.status(w.ID) != Granted {
			t.Fatalf("expire=%v: waiter not granted after the holder's session ended", expire)
		}
		kinds := map[EventKind]int{}
		for _, e := range res.Events {
			kinds[e.Kind]++
		}
		if expire && (kinds[EvExpired] != 2 || kinds[EvSessionExpired] != 1 || kinds[EvCancelled] != 1) {
			t.Errorf("expire events %v", res.Events)
		}
		if !expire && (kinds[EvReleased] != 2 || kinds[EvSessionClosed] != 1 || kinds[EvCancelled] != 1 || kinds[EvGranted] != 1) {
			t.Errorf("close events %v", res.Events)
		}
	}
}

func TestLockDelayCoversHierarchy(t *testing.T) {
	d := newDriver(t)
	a := d.session(func(c *CreateSession) { c.LockDelay = time.Second })
	b := d.session()
	d.acquire(a, "a/b", Write, 0)
	d.apply(&ExpireSession{Session: a})
	for _, name := range []string{"a", "a/b", "a/b/c"} {
		if r := d.acquire(b, name, Read, 0); r.Status != TimedOut {
			t.Errorf("%s during lock-delay: %s", name, r.Status)
		}
	}
	if r := d.acquire(b, "a/c", Write, 0); r.Status != Granted {
		t.Errorf("sibling during lock-delay: %s", r.Status)
	}
	d.advance(time.Second)
	if r := d.acquire(b, "a/b", Write, 0); r.Status != Granted {
		t.Errorf("after lock-delay: %s", r.Status)
	}
}

func TestReentrancy(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	first := d.acquire(a, "x", Write, 0)
	again := d.acquire(a, "x", Write, 0)
	read := d.acquire(a, "x", Read, 0) // weaker mode: reentrant too
	if again.Status != Granted || read.Status != Granted || again.Token != first.Token {
		t.Fatalf("reentrant: %+v %+v", again, read)
	}
	if li, _ := d.tab.Lock("x"); li.Holders[0].Count != 3 {
		t.Fatalf("count %d", li.Holders[0].Count)
	}
	w := d.acquire(b, "x", Write, time.Minute)
	for i := 0; i < 2; i++ {
		d.release(a, "x")
		if d.status(w.ID) != Pending {
			t.Fatalf("released after %d of 3", i+1)
		}
	}
	d.release(a, "x")
	if d.status(w.ID) != Granted {
		t.Fatal("not released at count 0")
	}
	if res := d.release(a, "x"); res.Err == nil || res.Err.Code != CodeNotHeld {
		t.Fatalf("release of a lock not held: %v", res.Err)
	}
}

func TestUpgrade(t *testing.T) {
	d := newDriver(t)
	a, b, c := d.session(), d.session(), d.session()
	d.acquire(a, "x", Read, 0)
	d.acquire(b, "x", Read, 0)
	w := d.acquire(c, "x", Write, time.Minute) // an earlier waiter
	up := d.acquire(a, "x", Write, time.Minute)
	if up.Status != Pending {
		t.Fatalf("upgrade beside another reader: %s", up.Status)
	}
	d.release(b, "x")
	if d.status(up.ID) != Granted {
		t.Fatal("upgrade must be granted once the session is the only holder, ahead of waiters")
	}
	li, _ := d.tab.Lock("x")
	if len(li.Holders) != 1 || li.Holders[0].Mode != Write || li.Holders[0].Count != 2 || li.Holders[0].Token != d.index {
		t.Fatalf("after upgrade: %+v", li.Holders)
	}
	if d.status(w.ID) != Pending {
		t.Fatal("waiter granted beside a writer")
	}
}

// Among conflicting requests grants happen in arrival order, across the
// hierarchy too; compatible readers at the head are granted together.
func TestFairness(t *testing.T) {
	type ask struct {
		name string
		m    Mode
	}
	for _, tc := range []struct {
		name    string
		held    ask
		queue   []ask
		granted []bool // after the holder releases
	}{
		{"fifo writers", ask{"x", Write}, []ask{{"x", Write}, {"x", Write}}, []bool{true, false}},
		{"readers together", ask{"x", Write}, []ask{{"x", Read}, {"x", Read}, {"x", Write}, {"x", Read}}, []bool{true, true, false, false}},
		{"reader waits behind earlier writer", ask{"x", Read}, []ask{{"x", Write}, {"x", Read}}, []bool{true, false}},
		{"child waits behind earlier parent waiter", ask{"a/b", Write}, []ask{{"a", Write}, {"a/c", Write}}, []bool{true, false}},
		{"parent waits behind earlier child waiter", ask{"a", Write}, []ask{{"a/b", Write}, {"a", Read}}, []bool{true, false}},
		{"siblings do not wait for each other", ask{"a", Write}, []ask{{"a/b", Write}, {"a/c", Write}}, []bool{true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			h := d.session()
			d.acquire(h, tc.held.name, tc.held.m, 0)
			var ids []string
			for _, q := range tc.queue {
				r := d.acquire(d.session(), q.name, q.m, time.Minute)
				if r.Status != Pending {
					t.Fatalf("%v: not queued (%s)", q, r.Status)
				}
				ids = append(ids, r.ID)
			}
			d.release(h, tc.held.name)
			for i, id := range ids {
				if got := d.status(id) == Granted; got != tc.granted[i] {
					t.Errorf("waiter %d %v: granted=%v, want %v", i, tc.queue[i], got, tc.granted[i])
				}
			}
		})
	}
}

// A later request that could be granted must still wait behind an earlier
// conflicting waiter: no overtaking, so no starvation.
func TestNoOvertaking(t *testing.T) {
	d := newDriver(t)
	r1, r2, w := d.session(), d.session(), d.session()
	d.acquire(r1, "x", Read, 0)
	ww := d.acquire(w, "x", Write, time.Minute)
	if r := d.acquire(r2, "x", Read, 0); r.Status != TimedOut {
		t.Fatalf("reader overtook a waiting writer: %s", r.Status)
	}
	d.release(r1, "x")
	if d.status(ww.ID) != Granted {
		t.Fatal("writer not granted")
	}
}

func TestVersions(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	var last uint64
	step := func(what string, changed bool, f func()) {
		f()
		v := d.tab.Version("x")
		if changed && v != d.index {
			t.Errorf("%s: version %d, want %d", what, v, d.index)
		}
		if !changed && v != last {
			t.Errorf("%s: version moved %d -> %d", what, last, v)
		}
		if v < last {
			t.Errorf("%s: version decreased", what)
		}
		last = v
	}
	step("grant", true, func() { d.acquire(a, "x", Write, 0) })
	step("failed try", false, func() { d.acquire(b, "x", Write, 0) })
	step("enqueue", true, func() { d.acquire(b, "x", Write, time.Minute) })
	step("reentrant", true, func() { d.acquire(a, "x", Write, 0) })
	step("other name", false, func() { d.acquire(a, "y", Write, 0) })
	step("release one count", true, func() { d.release(a, "x") })
	step("handoff", true, func() { d.release(a, "x") })
}

func TestMultiLock(t *testing.T) {
	for _, tc := range []struct {
		req     quorum.Requirement
		busy    []string // held by someone else
		granted []string // nil: not granted (timeout)
	}{
		{quorum.All, nil, []string{"n1", "n2", "n3"}},
		{quorum.All, []string{"n2"}, nil},
		{quorum.Any, []string{"n1"}, []string{"n2"}},
		{quorum.Any, []string{"n1", "n2", "n3"}, nil},
		{quorum.Majority, []string{"n1"}, []string{"n2", "n3"}},
		{quorum.Majority, []string{"n3"}, []string{"n1", "n2"}},
		{quorum.Majority, []string{"n1", "n3"}, nil},
	} {
		d := newDriver(t)
		o, s := d.session(), d.session()
		for _, n := range tc.busy {
			d.acquire(o, n, Write, 0)
		}
		before := d.tab.Digest()
		res := d.apply(&Acquire{Session: s, Require: tc.req, Locks: []LockSpec{{Name: "n1", Mode: Write}, {Name: "n2", Mode: Write}, {Name: "n3", Mode: Write}}})
		var got []string
		for _, g := range res.Request.Granted {
			got = append(got, g.Name)
		}
		if !slices.Equal(got, tc.granted) {
			t.Errorf("%s with %v busy: granted %v, want %v", tc.req, tc.busy, got, tc.granted)
		}
		held := map[string]bool{}
		si, _ := d.tab.Session(s)
		for _, h := range si.Held {
			held[h.Name] = true
		}
		if len(held) != len(tc.granted) {
			t.Errorf("%s: session holds %v, want exactly %v (no useless subset)", tc.req, held, tc.granted)
		}
		if tc.granted == nil && d.tab.Digest() == before {
			// the timeout is remembered for idempotency: the digest moves, holds do not
			if len(held) != 0 {
				t.Error("failed multi-lock left holds")
			}
		}
	}
}

// A queued multi-lock request is granted atomically once k constituents are
// free together, and the others are withdrawn from their queues.
func TestMultiLockQueued(t *testing.T) {
	d := newDriver(t)
	o1, o2, s := d.session(), d.session(), d.session()
	d.acquire(o1, "n1", Write, 0)
	d.acquire(o2, "n2", Write, 0)
	res := d.apply(&Acquire{Session: s, Require: quorum.Any, Wait: time.Minute,
		Locks: []LockSpec{{Name: "n1", Mode: Write}, {Name: "n2", Mode: Write}}})
	if res.Request.Status != Pending {
		t.Fatalf("%s", res.Request.Status)
	}
	d.release(o2, "n2")
	r, _ := d.request(res.Request.ID)
	if r.Status != Granted || len(r.Granted) != 1 || r.Granted[0].Name != "n2" {
		t.Fatalf("any: %+v", r)
	}
	if li, _ := d.tab.Lock("n1"); len(li.Waiters) != 0 {
		t.Fatalf("n1 still has waiters %+v", li.Waiters)
	}
	// all: granted only when both are free, never partially.
	res = d.apply(&Acquire{Session: o2, Wait: time.Minute,
		Locks: []LockSpec{{Name: "n1", Mode: Write}, {Name: "n3", Mode: Write}}})
	if res.Request.Status != Pending {
		t.Fatal("all with n1 busy must wait")
	}
	if li, ok := d.tab.Lock("n3"); !ok || len(li.Holders) != 0 || len(li.Waiters) != 1 {
		t.Fatalf("n3 must be waited for, not held: %+v", li)
	}
	d.release(o1, "n1")
	if d.status(res.Request.ID) != Granted {
		t.Fatal("all not granted when both free")
	}
}

func TestTryEnqueueCancel(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	d.acquire(a, "x", Write, 0)
	if r := d.acquire(b, "x", Write, 0); r.Status != TimedOut {
		t.Fatalf("try: %s", r.Status)
	}
	if li, _ := d.tab.Lock("x"); len(li.Waiters) != 0 {
		t.Fatal("a failed try must not queue")
	}
	w := d.acquire(b, "x", Write, time.Minute)
	res := d.apply(&Cancel{RequestID: w.ID})
	if res.Err != nil || res.Request.Status != Cancelled {
		t.Fatalf("cancel: %+v %v", res.Request, res.Err)
	}
	if li, _ := d.tab.Lock("x"); len(li.Waiters) != 0 {
		t.Fatal("cancelled request still queued")
	}
	// The grant wins the race with a cancel: the answer is "granted".
	w2 := d.acquire(b, "x", Write, time.Minute)
	d.release(a, "x")
	res = d.apply(&Cancel{RequestID: w2.ID})
	if res.Err != nil || res.Request.Status != Granted {
		t.Fatalf("cancel after grant: %+v %v", res.Request, res.Err)
	}
	if got := d.holders("x"); !slices.Equal(got, []SessionID{b}) {
		t.Fatalf("holders %v", got)
	}
	if res := d.apply(&Cancel{RequestID: "nope"}); res.Err == nil || res.Err.Code != CodeNoRequest {
		t.Fatalf("unknown request: %v", res.Err)
	}
	if res := d.apply(&Cancel{Session: a, RequestID: w2.ID}); res.Err == nil || res.Err.Code != CodeNoRequest {
		t.Fatalf("another session's request: %v", res.Err)
	}
}

func TestWaitTimeout(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	d.acquire(a, "x", Write, 0)
	w := d.acquire(b, "x", Write, 3*time.Second)
	d.advance(3*time.Second - 1)
	if d.status(w.ID) != Pending {
		t.Fatal("timed out early")
	}
	res := d.advance(1)
	if d.status(w.ID) != TimedOut {
		t.Fatal("did not time out")
	}
	if len(res.Events) != 1 || res.Events[0].Kind != EvTimeout || res.Events[0].RequestID != w.ID {
		t.Fatalf("events %+v", res.Events)
	}
}

func TestSurrender(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	d.acquire(a, "x", Write, 0)
	d.acquire(a, "x", Write, 0) // count 2, restored on regrant
	res := d.apply(&Surrender{Session: a, Name: "x"})
	if res.Err != nil || !res.Kept {
		t.Fatalf("no waiters: %+v", res)
	}
	w := d.acquire(b, "x", Write, time.Minute)
	res = d.apply(&Surrender{Session: a, Name: "x"})
	if res.Err != nil || res.Kept {
		t.Fatalf("with a waiter: %+v", res)
	}
	if d.status(w.ID) != Granted {
		t.Fatal("waiter not granted")
	}
	si, _ := d.tab.Session(a)
	if len(si.Pending) != 1 || len(si.Held) != 0 {
		t.Fatalf("surrendering session must be queued again: %+v", si)
	}
	d.release(b, "x")
	si, _ = d.tab.Session(a)
	if len(si.Held) != 1 || si.Held[0].Count != 2 || si.Held[0].Token != d.index {
		t.Fatalf("regrant: %+v", si.Held)
	}
	if res := d.apply(&Surrender{Session: b, Name: "x"}); res.Err == nil || res.Err.Code != CodeNotHeld {
		t.Fatalf("surrender not held: %v", res.Err)
	}
}

func TestDeadlock(t *testing.T) {
	for _, policy := range []OnDeadlock{Abort, SurrenderLock} {
		t.Run(string(policy), func(t *testing.T) {
			d := newDriver(t)
			opt := func(c *CreateSession) { c.OnDeadlock = policy }
			old, young := d.session(opt), d.session(opt)
			d.acquire(old, "a", Write, 0)
			d.acquire(young, "b", Write, 0)
			wo := d.acquire(old, "b", Write, time.Minute)
			res := d.apply(&Acquire{Session: young, Locks: []LockSpec{{Name: "a", Mode: Write}}, Wait: time.Minute})
			wy := res.Request
			edge := func(g []Edge, from, to SessionID) bool {
				return slices.ContainsFunc(g, func(e Edge) bool { return e.From == from && e.To == to })
			}
			if g := d.tab.WaitGraph(); edge(g, old, young) && edge(g, young, old) {
				t.Fatalf("cycle survived: %v", g)
			}
			switch policy {
			case Abort:
				if wy.Status != Deadlock || d.status(wo.ID) != Pending {
					t.Fatalf("victim must be the youngest: young %s old %s", wy.Status, d.status(wo.ID))
				}
				if !slices.ContainsFunc(res.Events, func(e Event) bool { return e.Kind == EvDeadlock && e.Session == young }) {
					t.Fatalf("no deadlock event: %+v", res.Events)
				}
			case SurrenderLock:
				// young gives up b; old gets it; young keeps waiting for a and b.
				if d.status(wo.ID) != Granted || wy.Status != Pending {
					t.Fatalf("surrender: old %s young %s", d.status(wo.ID), wy.Status)
				}
				d.release(old, "a")
				d.release(old, "b")
				si, _ := d.tab.Session(young)
				if len(si.Held) != 2 {
					t.Fatalf("young must end with a and b: %+v", si)
				}
			}
		})
	}
}

// A three-session cycle through the hierarchy and a waiter edge.
func TestDeadlockCycleOfThree(t *testing.T) {
	d := newDriver(t)
	s1, s2, s3 := d.session(), d.session(), d.session()
	d.acquire(s1, "a/x", Write, 0)
	d.acquire(s2, "b", Write, 0)
	d.acquire(s3, "c", Write, 0)
	d.acquire(s1, "b/y", Write, time.Minute) // s1 -> s2 (ancestor holder)
	d.acquire(s2, "c", Read, time.Minute)    // s2 -> s3
	r := d.acquire(s3, "a", Read, time.Minute)
	if r.Status != Deadlock {
		t.Fatalf("youngest (s3) must be the victim: %s", r.Status)
	}
	if g := d.tab.WaitGraph(); slices.ContainsFunc(g, func(e Edge) bool { return e.From == s3 }) {
		t.Fatalf("victim still waits: %v", g)
	}
}

func TestOrderedLocking(t *testing.T) {
	d := newDriver(t)
	s := d.session(func(c *CreateSession) { c.Ordered = true })
	d.acquire(s, "b", Write, 0)
	for _, tc := range []struct {
		name string
		code Code
	}{
		{"c", ""},
		{"a", CodePoorlyOrdered},
		{"b", ""}, // held already: reentrant
		{"bb", CodePoorlyOrdered},
		{"d", ""},
	} {
		res := d.apply(&Acquire{Session: s, Locks: []LockSpec{{Name: tc.name, Mode: Write}}})
		if tc.code == "" && res.Err != nil || tc.code != "" && (res.Err == nil || res.Err.Code != tc.code) {
			t.Errorf("%s: %v, want %q", tc.name, res.Err, tc.code)
		}
	}
}

func TestTokensAndCheck(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	g1 := d.acquire(a, "db", Write, 0)
	if g1.Token != d.index {
		t.Fatalf("token %d != index %d", g1.Token, d.index)
	}
	for _, tc := range []struct {
		name  string
		token uint64
		valid bool
	}{
		{"db", g1.Token, true},
		{"db/orders/1", g1.Token, true}, // a lock on db protects db/...
		{"db", g1.Token - 1, false},
		{"other", g1.Token, false},
		{"db", 0, false},
	} {
		if v, _ := d.tab.Check(tc.name, tc.token); v != tc.valid {
			t.Errorf("Check(%s, %d) = %v", tc.name, tc.token, v)
		}
	}
	w := d.acquire(b, "db", Write, time.Minute)
	d.release(a, "db")
	r, _ := d.request(w.ID)
	if r.Token <= g1.Token {
		t.Fatalf("next token %d not above %d", r.Token, g1.Token)
	}
	if v, cur := d.tab.Check("db", g1.Token); v || cur != r.Token {
		t.Fatalf("stale token still valid (%v, current %d)", v, cur)
	}
}

func TestHoldTTL(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	res := d.apply(&Acquire{Session: a, Locks: []LockSpec{{Name: "x", Mode: Write}}, HoldTTL: 2 * time.Second})
	if res.Request.Status != Granted {
		t.Fatal(res.Request.Status)
	}
	w := d.acquire(b, "x", Write, time.Minute)
	if at, _ := d.tab.NextDeadline(); at != d.now+int64(2*time.Second) {
		t.Fatalf("next deadline %d", at)
	}
	d.advance(time.Second)
	if d.status(w.ID) != Pending {
		t.Fatal("hold expired early")
	}
	out := d.advance(time.Second)
	if d.status(w.ID) != Granted {
		t.Fatal("hold did not expire")
	}
	if !slices.ContainsFunc(out.Events, func(e Event) bool { return e.Kind == EvExpired && e.Name == "x" && e.Session == a }) {
		t.Fatalf("events %+v", out.Events)
	}
}

func TestClockIsMaxNow(t *testing.T) {
	d := newDriver(t)
	d.advance(time.Second)
	c := d.tab.Clock()
	d.now -= int64(time.Minute) // a leader with a slower clock
	d.apply(&Tick{})
	if d.tab.Clock() != c {
		t.Fatal("clock went backwards")
	}
}

func TestIdempotentAcquire(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	acq := &Acquire{Session: a, RequestID: "job-1", Locks: []LockSpec{{Name: "x", Mode: Write}}}
	r1 := d.apply(acq).Request
	r2 := d.apply(acq).Request
	if r1.Status != Granted || r2.Status != Granted || r2.Token != r1.Token {
		t.Fatalf("%+v %+v", r1, r2)
	}
	if li, _ := d.tab.Lock("x"); li.Holders[0].Count != 1 {
		t.Fatal("a retried acquire was granted twice")
	}
	wq := &Acquire{Session: b, RequestID: "job-2", Locks: []LockSpec{{Name: "x", Mode: Write}}, Wait: time.Minute}
	d.apply(wq)
	d.apply(wq)
	if li, _ := d.tab.Lock("x"); len(li.Waiters) != 1 {
		t.Fatal("a retried wait was queued twice")
	}
	if res := d.apply(&Acquire{Session: b, RequestID: "job-1", Locks: []LockSpec{{Name: "y", Mode: Write}}}); res.Err == nil {
		t.Fatal("another session's request id accepted")
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	d := newDriver(t)
	a := d.session()
	d.acquire(a, "x", Write, 0)
	d.acquire(a, "pool", Write, 0)
	locks := func(ls ...LockSpec) []LockSpec { return ls }
	w := LockSpec{Name: "y", Mode: Write}
	for _, tc := range []struct {
		cmd  Command
		code Code
	}{
		{&Acquire{Session: 999, Locks: locks(w)}, CodeNoSession},
		{&Acquire{Session: a}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(LockSpec{Name: strings.Repeat("x", 600), Mode: Write})}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(LockSpec{Name: "a//b", Mode: Write})}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(LockSpec{Name: "y", Mode: 7})}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(LockSpec{Name: "y", Mode: Read, Weight: 2, Limit: 3})}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(LockSpec{Name: "y", Mode: Write, Weight: -1})}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(LockSpec{Name: "y", Mode: Write, Limit: -1})}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(w, w)}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(w), Require: "most"}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(w), Wait: -1}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(w), HoldTTL: MaxHoldTTL + 1}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(w), RequestID: "~auto-1"}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(w), RequestID: "a\x01"}, CodeInvalid},
		{&Acquire{Session: a, Locks: locks(LockSpec{Name: "pool", Mode: Write, Limit: 5})}, CodeLimitMismatch},
		{&Acquire{Session: a, Locks: make([]LockSpec, MaxLocksPerReq+1)}, CodeInvalid},
		{&Release{Session: a, Name: "nope"}, CodeNotHeld},
		{&Release{Session: a}, CodeInvalid},
		{&Release{Session: a, Name: "x", RequestID: "r"}, CodeInvalid},
		{&Release{Session: a, RequestID: "nope"}, CodeNoRequest},
		{&Release{Session: 999, Name: "x"}, CodeNoSession},
		{&Surrender{Session: a, Name: "nope"}, CodeNotHeld},
		{&Surrender{Session: a, Name: ""}, CodeInvalid},
		{&CloseSession{Session: 999}, CodeNoSession},
		{&ExpireSession{Session: 999}, CodeNoSession},
		{&Cancel{RequestID: "nope"}, CodeNoRequest},
		{nil, CodeInvalid},
	} {
		before := d.tab.Digest()
		res := d.apply(tc.cmd)
		if res.Err == nil || res.Err.Code != tc.code {
			t.Errorf("%T %+v: err %v, want %s", tc.cmd, tc.cmd, res.Err, tc.code)
		}
		if d.tab.Digest() != before {
			t.Errorf("%T %+v changed the table", tc.cmd, tc.cmd)
		}
		if len(res.Events) != 0 {
			t.Errorf("%T: events from a failed command: %+v", tc.cmd, res.Events)
		}
	}
	// An old index is refused.
	before := d.tab.Digest()
	if res := d.tab.Apply(Entry{Index: 1, Now: d.now, Cmd: &Tick{}}); res.Err == nil {
		t.Fatal("replayed index accepted")
	}
	if d.tab.Digest() != before {
		t.Fatal("refused entry changed the table")
	}
}

func TestReleaseByRequest(t *testing.T) {
	d := newDriver(t)
	a := d.session()
	res := d.apply(&Acquire{Session: a, RequestID: "multi", Locks: []LockSpec{{Name: "p", Mode: Write}, {Name: "q", Mode: Read}}})
	if res.Request.Status != Granted {
		t.Fatal(res.Request.Status)
	}
	rel := d.apply(&Release{Session: a, RequestID: "multi"})
	if rel.Err != nil || !slices.Equal(rel.Released, []string{"p", "q"}) {
		t.Fatalf("%+v", rel)
	}
	if len(d.tab.Locks("")) != 0 {
		t.Fatalf("left: %+v", d.tab.Locks(""))
	}
}

func TestDigestIsContentOnly(t *testing.T) {
	build := func(extraTicks int) *Table {
		d := newDriver(t)
		a := d.session()
		for i := 0; i < extraTicks; i++ {
			d.apply(&Tick{})
		}
		d.acquire(a, "x", Write, 0)
		d.release(a, "x")
		return d.tab
	}
	t1, t2 := build(0), build(0)
	if t1.Digest() != t2.Digest() {
		t.Fatal("same log, different digests")
	}
	if t1.Digest() == build(1).Digest() {
		// the acquire's index differs, so the remembered request differs
		t.Fatal("different histories with different remembered requests share a digest")
	}
}

func TestLocksListing(t *testing.T) {
	d := newDriver(t)
	a := d.session()
	for _, n := range []string{"jobs/b", "jobs/a", "other", "jobs"} {
		d.acquire(a, n, Read, 0)
	}
	var names []string
	for _, li := range d.tab.Locks("jobs/") {
		names = append(names, li.Name)
	}
	if !slices.Equal(names, []string{"jobs/a", "jobs/b"}) {
		t.Fatalf("%v", names)
	}
	d.release(a, "jobs/a")
	if _, ok := d.tab.Lock("jobs/a"); ok {
		t.Fatal("released name still listed")
	}
}

// A snapshot header is input: counts that lie must neither allocate for
// billions of records nor be believed.
func TestLoaderHeaderCountsAreCapped(t *testing.T) {
	l, err := NewLoader(Header{Format: FormatVersion, Sessions: 1<<31 - 1, Nodes: 1<<31 - 1, Requests: 1<<31 - 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Table(); err == nil {
		t.Fatal("a table with fewer records than its header declares was accepted")
	}
	if _, err := NewLoader(Header{Format: FormatVersion + 1}); err == nil {
		t.Fatal("unknown format accepted")
	}
}

// A granted request says "granted" only while its session still holds what
// it was granted: a retry with the same request_id after the hold ended
// must not tell the client it holds a lock someone else may hold now.
func TestGrantedRequestViewFollowsTheHold(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(d *driver, s SessionID)
	}{
		{"hold_ttl expired", func(d *driver, s SessionID) { d.advance(2 * time.Second) }},
		{"released by name", func(d *driver, s SessionID) { d.release(s, "x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			a, b := d.session(), d.session()
			acq := &Acquire{Session: a, RequestID: "job", Locks: []LockSpec{{Name: "x", Mode: Write}}, HoldTTL: time.Second}
			if r := d.apply(acq).Request; r.Status != Granted {
				t.Fatal(r.Status)
			}
			tc.end(d, a)
			d.acquire(b, "x", Write, 0)
			again := &Acquire{Session: a, RequestID: "job", Locks: []LockSpec{{Name: "x", Mode: Write}}}
			if r := d.apply(again).Request; r.Status != Released {
				t.Fatalf("retry after the hold ended: %s, want released", r.Status)
			}
			if r, _ := d.request("job"); r.Status != Released {
				t.Fatalf("Request view: %s", r.Status)
			}
		})
	}
}
