package checker

import (
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

func TestSafety(t *testing.T) {
	cfg := Config{Fenced: true}
	tests := []struct {
		name  string
		build func(h *hb)
		cfg   Config
		valid bool
		check func(t *testing.T, r Result)
	}{
		{"sequential holders", func(h *hb) {
			h.lock(1, "a", 1)
			h.res(1, history.ResRead, wg("a", 1), 1, 0, "")
			h.res(1, history.ResWrite, wg("a", 1), 2, 10, "")
			h.release(1, "a")
			h.lock(2, "a", 3)
			h.res(2, history.ResRead, wg("a", 3), 3, 0, "")
			h.res(2, history.ResWrite, wg("a", 3), 4, 11, "")
		}, cfg, true, nil},
		{"overlapping windows (unfenced)", func(h *hb) {
			h.res(1, history.ResRead, wg("a", 1), 1, 0, "")
			h.res(2, history.ResRead, wg("a", 3), 2, 0, "")
			h.res(1, history.ResWrite, wg("a", 1), 3, 10, "")
		}, Config{}, false, func(t *testing.T, r Result) {
			if r.Counts["stale-accepted"] != 1 {
				t.Errorf("stale-accepted = %d", r.Counts["stale-accepted"])
			}
		}},
		{"stale write accepted without overlap", func(h *hb) {
			h.res(2, history.ResWrite, wg("a", 3), 1, 11, "")
			h.res(1, history.ResWrite, wg("a", 1), 2, 10, "")
		}, cfg, false, nil},
		{"stale write rejected: paused holder", func(h *hb) {
			h.res(1, history.ResRead, wg("a", 1), 1, 0, "")
			h.res(2, history.ResRead, wg("a", 3), 2, 0, "")
			h.res(2, history.ResWrite, wg("a", 3), 3, 11, "")
			h.res(1, history.ResWrite, wg("a", 1), 0, 10, "stale")
		}, cfg, true, func(t *testing.T, r Result) {
			if r.Counts["rejected-stale"] != 1 || r.Counts["accepted"] != 3 || r.Counts["holds"] != 2 {
				t.Errorf("counts %v", r.Counts)
			}
		}},
		{"readers share", func(h *hb) {
			h.res(1, history.ResRead, rg("a", 5), 1, 0, "")
			h.res(2, history.ResRead, rg("a", 5), 2, 0, "")
			h.res(1, history.ResRead, rg("a", 5), 3, 0, "")
			h.res(3, history.ResWrite, wg("a", 7), 4, 1, "")
		}, cfg, true, nil},
		{"reader overlaps writer", func(h *hb) {
			h.res(1, history.ResRead, rg("a", 5), 1, 0, "")
			h.res(3, history.ResWrite, wg("a", 7), 2, 1, "")
			h.res(1, history.ResRead, rg("a", 5), 3, 0, "")
		}, Config{}, false, nil},
		{"hierarchy overlap", func(h *hb) {
			h.res(1, history.ResWrite, wg("h", 1), 1, 1, "")
			h.res(2, history.ResWrite, wg("h/a", 2), 2, 2, "")
			h.res(1, history.ResWrite, wg("h", 1), 3, 3, "")
		}, Config{}, false, nil},
		{"siblings do not conflict", func(h *hb) {
			h.res(1, history.ResWrite, wg("h/b", 1), 1, 1, "")
			h.res(2, history.ResWrite, wg("h/a", 2), 2, 2, "")
			h.res(1, history.ResWrite, wg("h/b", 1), 3, 3, "")
		}, cfg, true, nil},
		{"semaphore within limit", func(h *hb) {
			h.acquire(1, sl("s", 2))
			h.res(1, history.ResEnter, wg("s", 1), 1, 0, "")
			h.res(2, history.ResEnter, wg("s", 2), 2, 0, "")
			h.res(1, history.ResExit, wg("s", 1), 3, 0, "")
			h.res(3, history.ResEnter, wg("s", 3), 4, 0, "")
		}, cfg, true, nil},
		{"semaphore over limit", func(h *hb) {
			h.acquire(1, sl("s", 2))
			h.res(1, history.ResEnter, wg("s", 1), 1, 0, "")
			h.res(2, history.ResEnter, wg("s", 2), 2, 0, "")
			h.res(3, history.ResEnter, wg("s", 3), 3, 0, "")
		}, cfg, false, nil},
		{"semaphore over limit excused by lost session", func(h *hb) {
			h.acquire(1, sl("s", 2))
			h.res(1, history.ResEnter, wg("s", 1), 1, 0, "")
			h.res(2, history.ResEnter, wg("s", 2), 2, 0, "")
			h.res(3, history.ResEnter, wg("s", 3), 3, 0, "")
			h.res(1, history.ResExit, wg("s", 1), 4, 0, "")
			h.lost(1)
		}, cfg, true, func(t *testing.T, r Result) {
			if r.Counts["excused"] != 1 {
				t.Errorf("excused = %d", r.Counts["excused"])
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &hb{}
			tc.build(h)
			r := Safety(h.ev, tc.cfg)
			if r.OK() != tc.valid {
				t.Fatalf("verdict %s, want valid=%v: %v %v", r.Verdict, tc.valid, r.Anomalies, r.Counts)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// A semaphore over-subscription (3 users inside a limit of 2) is not
// excused by a loss of process 1 long after the window closed: every
// session was demonstrably alive then (their releases were acknowledged
// and process 1 acquired again).
func TestSafetySemaphoreOverflowNotExcusedByLaterLoss(t *testing.T) {
	h := &hb{}
	for p := 1; p <= 3; p++ {
		h.acquire(p, sl("s", 2))
		h.granted(p, wg("s", uint64(p)))
	}
	for p := 1; p <= 3; p++ {
		h.res(p, history.ResEnter, wg("s", uint64(p)), uint64(p), 0, "")
	}
	for p := 1; p <= 3; p++ {
		h.res(p, history.ResExit, wg("s", uint64(p)), uint64(3+p), 0, "")
		h.release(p, "s")
	}
	// Process 1 is alive (acquire and release ok) long after; lost later.
	h.acquire(1, sl("s", 2))
	h.granted(1, wg("s", 10))
	h.release(1, "s")
	h.lost(1)
	r := Safety(h.ev, Config{Workload: "semaphore", Limit: 2, Fenced: true})
	if r.OK() {
		t.Fatalf("3 users inside a 2-permit semaphore with live sessions judged valid: %+v", r)
	}
}

// The fenced resource makes window overlap impossible for exclusive
// holds (the older holder's next use is rejected), so Safety also
// compares the holds as the clients saw them: a double grant of a mutex
// to two live sessions, both acknowledged and both used at the resource,
// is a violation.
func TestSafetyCatchesDoubleGrantUnderFencing(t *testing.T) {
	h := &hb{}
	h.lock(1, "m", 5)
	h.res(1, history.ResRead, wg("m", 5), 1, 0, "")
	h.lock(2, "m", 9) // granted while process 1 holds m: a real violation
	h.res(2, history.ResRead, wg("m", 9), 2, 0, "")
	h.res(2, history.ResWrite, wg("m", 9), 3, 100, "")
	h.res(1, history.ResWrite, wg("m", 5), 0, 101, "stale")
	h.release(1, "m") // process 1's session was alive throughout
	h.release(2, "m")
	r := Safety(h.ev, Config{Workload: "mutex", Fenced: true})
	if r.OK() {
		t.Fatalf("two conflicting live holds, both acknowledged and used at the resource, judged safe: %+v", r)
	}
}

// lockTTL is a whole exclusive acquire of name with a hold TTL.
func (h *hb) lockTTL(p int, name string, tok uint64, ttl time.Duration) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: history.Acquire, Locks: []history.Lock{wl(name)}, HoldTTL: ttl})
	h.add(history.Event{Type: history.OK, Process: p, F: history.Acquire, Granted: []history.Granted{wg(name, tok)}, Token: tok, HoldTTL: ttl})
}

// A hold with a TTL counts until its deadline (acquire invoke + TTL): a
// conflicting grant after it is fine, and the holder's release then
// finds nothing; a conflicting grant before it is a violation, which
// the holder's not_held release does not excuse (the clock nemesis's
// negative control, --unsafe wall-clock, must be caught this way).
func TestSafetyHoldTTL(t *testing.T) {
	for _, early := range []bool{false, true} {
		h := &hb{}
		h.lockTTL(1, "m", 5, time.Second)
		h.res(1, history.ResRead, wg("m", 5), 1, 0, "")
		h.res(1, history.ResWrite, wg("m", 5), 2, 100, "")
		if !early {
			h.sleep(2 * time.Second)
		}
		h.lockTTL(2, "m", 9, time.Second)
		h.res(2, history.ResRead, wg("m", 9), 3, 0, "")
		h.res(2, history.ResWrite, wg("m", 9), 4, 101, "")
		h.releaseInv(1, "m")
		h.done(1, history.Release, history.Fail, "not_held")
		h.release(2, "m")
		h.lockTTL(1, "m", 12, time.Second) // process 1's session lives on
		h.release(1, "m")
		r := Safety(h.ev, Config{Workload: "mutex", Fenced: true})
		if r.OK() == early {
			t.Errorf("second grant %s the first one's deadline: verdict %s, %v", map[bool]string{true: "before", false: "after"}[early], r.Verdict, r.Anomalies)
		}
	}
}

// A semaphore user still inside past its hold TTL's deadline may have
// lost its permit: a surplus made of it is excused, one before it not.
func TestSafetySemaphoreHoldTTL(t *testing.T) {
	for _, late := range []bool{false, true} {
		h := &hb{}
		for p := 1; p <= 2; p++ {
			h.add(history.Event{Type: history.Invoke, Process: p, F: history.Acquire, Locks: []history.Lock{sl("s", 2)}, HoldTTL: time.Second})
			h.add(history.Event{Type: history.OK, Process: p, F: history.Acquire, Granted: []history.Granted{wg("s", uint64(p))}, HoldTTL: time.Second})
			h.res(p, history.ResEnter, wg("s", uint64(p)), uint64(p), 0, "")
		}
		if late {
			h.sleep(2 * time.Second)
		}
		h.res(3, history.ResEnter, wg("s", 3), 3, 0, "")
		r := Safety(h.ev, Config{Workload: "semaphore", Limit: 2, Fenced: true})
		if r.OK() != late {
			t.Errorf("third user %s the others' deadlines: verdict %s, %v", map[bool]string{true: "after", false: "before"}[late], r.Verdict, r.Anomalies)
		}
	}
}
