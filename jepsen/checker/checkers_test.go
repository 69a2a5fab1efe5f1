package checker

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

type histCase struct {
	name  string
	build func(h *hb)
	valid bool
	want  Verdict // overrides valid when set
}

func runCases(t *testing.T, cases []histCase, check func([]history.Event) Result) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &hb{}
			tc.build(h)
			r := check(h.ev)
			want := tc.want
			if want == "" {
				want = Invalid
				if tc.valid {
					want = Valid
				}
			}
			if r.Verdict != want {
				t.Fatalf("verdict %s, want %s: %v %v %s", r.Verdict, want, r.Anomalies, r.Counts, r.Note)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	runCases(t, []histCase{
		{"increasing", func(h *hb) {
			h.lock(1, "a", 1)
			h.release(1, "a")
			h.lock(2, "a", 4)
		}, true, ""},
		{"decreasing", func(h *hb) {
			h.lock(1, "a", 5)
			h.release(1, "a")
			h.lock(2, "a", 3)
		}, false, ""},
		{"equal exclusive in real-time order", func(h *hb) {
			h.lock(1, "a", 5)
			h.release(1, "a")
			h.lock(2, "a", 5)
		}, false, ""},
		{"duplicate exclusive, concurrent", func(h *hb) {
			h.acquire(1, wl("a"))
			h.acquire(2, wl("a"))
			h.granted(1, wg("a", 5))
			h.granted(2, wg("a", 5))
		}, false, ""},
		{"concurrent grants in any token order", func(h *hb) {
			h.acquire(1, wl("a"))
			h.acquire(2, wl("a"))
			h.granted(2, wg("a", 9))
			h.granted(1, wg("a", 5))
		}, true, ""},
		{"readers share a token", func(h *hb) {
			h.lock(3, "a", 2)
			h.acquire(1, rl("a"))
			h.acquire(2, rl("a"))
			h.granted(1, rg("a", 7))
			h.release(3, "a")
			h.granted(2, rg("a", 7))
			h.acquire(4, rl("a"))
			h.granted(4, rg("a", 7)) // joins: same token is fine for readers
		}, true, ""},
		{"reader after writer with equal token", func(h *hb) {
			h.lock(3, "a", 7)
			h.acquire(1, rl("a"))
			h.granted(1, rg("a", 7))
		}, false, ""},
		{"semaphore permits may share", func(h *hb) {
			h.acquire(1, sl("s", 3))
			h.granted(1, wg("s", 4))
			h.acquire(2, sl("s", 3))
			h.granted(2, wg("s", 4))
		}, true, ""},
		{"names are independent", func(h *hb) {
			h.lock(1, "a", 9)
			h.lock(2, "b", 3)
		}, true, ""},
	}, func(ev []history.Event) Result { return Tokens(ev, Config{}) })
}

func TestLinearizable(t *testing.T) {
	cases := []histCase{
		{"observe reads agree with the grants", func(h *hb) {
			h.observe(9, "a")
			h.lock(1, "a", 1)
			h.observe(9, "a", held(1, "write", 1))
			h.release(1, "a")
			h.observe(9, "a")
		}, true, ""},
		{"stale read: the holder is seen after its release completed", func(h *hb) {
			h.lock(1, "a", 1)
			h.release(1, "a")
			h.observe(9, "a", held(1, "write", 1))
		}, false, ""},
		{"read misses an acknowledged holder", func(h *hb) {
			h.lock(1, "a", 1)
			h.observe(9, "a")
		}, false, ""},
		{"read sees a wrong token", func(h *hb) {
			h.lock(1, "a", 4)
			h.observe(9, "a", held(1, "write", 3))
		}, false, ""},
		{"read sees a session no process owns", func(h *hb) {
			h.observe(9, "a", history.Holder{Session: "ghost", Mode: "write", Token: 2})
		}, false, ""},
		{"reads concurrent with a grant: before it, then after it", func(h *hb) {
			h.acquire(1, wl("a"))
			h.observe(8, "a")
			h.observe(9, "a", held(1, "write", 2))
			h.granted(1, wg("a", 2))
		}, true, ""},
		{"reads concurrent with a grant: seen, then unseen", func(h *hb) {
			h.acquire(1, wl("a"))
			h.observe(9, "a", held(1, "write", 2))
			h.observe(8, "a")
			h.granted(1, wg("a", 2))
		}, false, ""},
		{"sequential mutex", func(h *hb) {
			h.lock(1, "a", 1)
			h.release(1, "a")
			h.lock(2, "a", 3)
			h.release(2, "a")
			h.close(2, history.OK)
		}, true, ""},
		{"two overlapping grants", func(h *hb) {
			h.lock(1, "a", 1)
			h.lock(2, "a", 3)
		}, false, ""},
		{"acquire after release, then the old holder releases again", func(h *hb) {
			h.lock(1, "a", 1)
			h.release(1, "a")
			h.release(1, "a")
		}, false, ""},
		{"decreasing token", func(h *hb) {
			h.lock(1, "a", 5)
			h.release(1, "a")
			h.lock(2, "a", 3)
		}, false, ""},
		{"concurrent acquires wait for a release", func(h *hb) {
			h.lock(1, "a", 1)
			h.acquire(2, wl("a"))
			h.acquire(3, wl("a"))
			h.releaseInv(1, "a")
			h.granted(2, wg("a", 4))
			h.done(1, history.Release, history.OK, "")
			h.done(3, history.Acquire, history.Fail, "timeout")
			h.release(2, "a")
		}, true, ""},
		{"paused past TTL: lost, then another process acquires", func(h *hb) {
			h.lock(1, "a", 1)
			h.lock(2, "a", 7) // p1's session expired meanwhile
			h.res(1, history.ResWrite, wg("a", 1), 0, 1, "stale")
			h.lost(1)
			h.release(2, "a")
		}, true, ""},
		{"lost by its keepalives: the cluster shows its hold until the close deletes it", func(h *hb) {
			h.lock(1, "a", 1)
			h.acquire(1, wl("b"))
			h.done(1, history.Acquire, history.Fail, "timeout") // alive after the grant of a
			h.lost(1)                                           // a margin before the cluster expires the session
			h.observe(9, "a", held(1, "write", 1))
			h.close(1, history.OK)
			h.lock(2, "a", 5)
			h.release(2, "a")
		}, true, ""},
		{"lost: its hold is seen after the close deleted it", func(h *hb) {
			h.lock(1, "a", 1)
			h.lost(1)
			h.close(1, history.OK)
			h.observe(9, "a", held(1, "write", 1))
		}, false, ""},
		{"lost after a not_held release: its hold is seen after the release", func(h *hb) {
			h.lock(1, "a", 1)
			h.releaseInv(1, "a")
			h.done(1, history.Release, history.Fail, "not_held")
			h.lost(1)
			h.observe(9, "a", held(1, "write", 1))
			h.close(1, history.OK)
		}, false, ""},
		{"paused past TTL: release fails not_held", func(h *hb) {
			h.lock(1, "a", 1)
			h.lock(2, "a", 7)
			h.releaseInv(1, "a")
			h.done(1, history.Release, history.Fail, "not_held")
			h.release(2, "a")
		}, true, ""},
		{"info acquire then close ok", func(h *hb) {
			h.acquire(1, wl("a"))
			h.done(1, history.Acquire, history.Info, "")
			h.close(1, history.OK)
			h.lock(2, "a", 9)
		}, true, ""},
		{"info acquire then close info", func(h *hb) {
			h.acquire(1, wl("a"))
			h.done(1, history.Acquire, history.Info, "")
			h.close(1, history.Info)
			h.lock(2, "a", 9)
			h.release(2, "a")
			h.lock(3, "a", 12)
		}, true, ""},
		{"info acquire granted before the close: its holder is seen, then released by the close", func(h *hb) {
			h.acquire(1, wl("a"))
			h.done(1, history.Acquire, history.Info, "")
			h.observe(2, "a", held(1, "write", 5))
			h.close(1, history.OK)
			h.lock(2, "a", 9)
		}, true, ""},
		{"info acquire cannot take effect after its session was closed", func(h *hb) {
			h.acquire(1, wl("a"))
			h.done(1, history.Acquire, history.Info, "")
			h.close(1, history.OK)
			h.observe(2, "a", held(1, "write", 5))
		}, false, ""},
		{"hold TTLs end a process's holds twice; others take the lock after each deadline", func(h *hb) {
			h.lockTTL(0, "x", 1, 100*time.Millisecond)
			h.sleep(200 * time.Millisecond)
			h.lockTTL(1, "x", 2, 100*time.Millisecond)
			h.release(1, "x")
			h.releaseInv(0, "x")
			h.done(0, history.Release, history.Fail, "not_held")
			h.lockTTL(0, "x", 3, 100*time.Millisecond)
			h.sleep(200 * time.Millisecond)
			h.lockTTL(2, "x", 4, 100*time.Millisecond)
			h.release(2, "x")
			h.releaseInv(0, "x")
			h.done(0, history.Release, history.Fail, "not_held")
		}, true, ""},
		{"a grant of unknown outcome, seen held, ends by its hold TTL", func(h *hb) {
			h.add(history.Event{Type: history.Invoke, Process: 0, F: history.Acquire, Locks: []history.Lock{wl("x")}, HoldTTL: 100 * time.Millisecond})
			h.observe(1, "x", held(0, "write", 5))
			h.done(0, history.Acquire, history.Info, "")
			h.sleep(200 * time.Millisecond)
			h.lockTTL(1, "x", 9, 100*time.Millisecond)
			h.release(1, "x")
		}, true, ""},
		{"a grant of unknown outcome, seen held, cannot end before its deadline", func(h *hb) {
			h.add(history.Event{Type: history.Invoke, Process: 0, F: history.Acquire, Locks: []history.Lock{wl("x")}, HoldTTL: time.Second})
			h.observe(1, "x", held(0, "write", 5))
			h.done(0, history.Acquire, history.Info, "")
			h.lockTTL(1, "x", 9, time.Second)
			h.release(1, "x")
		}, false, ""},
		{"a release answered ok after its hold's TTL: it may have expired first", func(h *hb) {
			h.lockTTL(0, "x", 1, 100*time.Millisecond)
			h.sleep(200 * time.Millisecond)
			h.lockTTL(1, "x", 2, time.Second)
			h.release(0, "x") // an attempt of unknown outcome, then the request read as released
			h.release(1, "x")
		}, true, ""},
		{"a release answered ok before its hold's TTL: it held the lock", func(h *hb) {
			h.lockTTL(0, "x", 1, time.Second)
			h.lockTTL(1, "x", 2, time.Second)
			h.release(0, "x")
			h.release(1, "x")
		}, false, ""},
		{"another process takes the lock before the hold TTL's deadline", func(h *hb) {
			h.lockTTL(0, "x", 1, time.Second)
			h.lockTTL(1, "x", 2, time.Second)
			h.sleep(2 * time.Second)
			h.releaseInv(0, "x")
			h.done(0, history.Release, history.Fail, "not_held")
			h.release(1, "x")
		}, false, ""},
		{"info acquire, never closed", func(h *hb) {
			h.acquire(1, wl("a"))
			h.done(1, history.Acquire, history.Info, "")
			h.lock(2, "a", 9)
		}, true, ""},
		{"close ok releases; close info of a holder may keep holding", func(h *hb) {
			h.lock(1, "a", 1)
			h.close(1, history.Info)
			h.lock(2, "a", 9)
		}, true, ""},
		{"readers overlap", func(h *hb) {
			h.acquire(1, rl("a"))
			h.granted(1, rg("a", 2))
			h.acquire(2, rl("a"))
			h.granted(2, rg("a", 2))
		}, true, ""},
		{"reader and writer overlap", func(h *hb) {
			h.acquire(1, rl("a"))
			h.granted(1, rg("a", 2))
			h.lock(2, "a", 5)
		}, false, ""},
		{"hierarchy conflict", func(h *hb) {
			h.lock(1, "h", 2)
			h.lock(2, "h/a", 5)
		}, false, ""},
		{"hierarchy siblings", func(h *hb) {
			h.lock(1, "h/b", 2)
			h.lock(2, "h/a", 5)
		}, true, ""},
		{"semaphore within limit", func(h *hb) {
			for p := 1; p <= 2; p++ {
				h.acquire(p, sl("s", 2))
				h.granted(p, wg("s", uint64(p)))
			}
		}, true, ""},
		{"semaphore over limit", func(h *hb) {
			for p := 1; p <= 3; p++ {
				h.acquire(p, sl("s", 2))
				h.granted(p, wg("s", uint64(p)))
			}
		}, false, ""},
		{"majority met", func(h *hb) {
			h.acquireReq(1, "majority", wl("x"), wl("y"), wl("z"))
			h.granted(1, wg("x", 2), wg("y", 2))
			h.lock(2, "z", 3)
		}, true, ""},
		{"majority short", func(h *hb) {
			h.acquireReq(1, "majority", wl("x"), wl("y"), wl("z"))
			h.granted(1, wg("x", 2))
		}, false, ""},
		{"multi-lock all conflicts", func(h *hb) {
			h.lock(2, "y", 1)
			h.acquire(1, wl("x"), wl("y"))
			h.granted(1, wg("x", 2), wg("y", 2))
		}, false, ""},
	}
	runCases(t, cases, func(ev []history.Event) Result { return Linearizable(ev, Config{}) })
	t.Run("cut wherever it may be", func(t *testing.T) {
		defer func(n int) { minSegment = n }(minSegment)
		minSegment = 1
		runCases(t, cases, func(ev []history.Event) Result { return Linearizable(ev, Config{}) })
	})
}

func TestLinearizableVisualisation(t *testing.T) {
	dir := t.TempDir()
	h := &hb{}
	h.lock(1, "a", 1)
	h.lock(2, "a", 3)
	h.add(history.Event{Type: history.Info, Process: history.Nemesis, F: history.Start, Fault: "kill"})
	h.add(history.Event{Type: history.Info, Process: history.Nemesis, F: history.Stop, Fault: "kill"})
	r := Linearizable(h.ev, Config{OutDir: dir})
	if r.OK() || len(r.Files) != 1 {
		t.Fatalf("result %+v", r)
	}
	b, err := os.ReadFile(filepath.Join(dir, r.Files[0]))
	if err != nil || len(b) < 1000 {
		t.Fatalf("visualisation: %v (%d bytes)", err, len(b))
	}
}

// A double grant of a mutex to two live sessions is not linearizable.
func TestLinearizableCatchesDoubleGrant(t *testing.T) {
	h := &hb{}
	h.lock(1, "m", 5)
	h.lock(2, "m", 9)
	h.release(1, "m")
	h.release(2, "m")
	if r := Linearizable(h.ev, Config{Workload: "mutex", Fenced: true}); r.OK() {
		t.Fatalf("not caught: %+v", r)
	}
}

// A definite "timeout" answer to an acquire proves the session was alive
// when the server applied it, so the expiry window inferred from a later
// not_held starts there, not at the last ok acquire or release. Process
// 0 holds x, process 1 is granted x, then process 0's acquire of y
// (invoked after that grant) is answered timeout: process 0 still held x
// when process 1 got it, and the double grant must not be explained away
// by an expiry before process 1's grant.
func TestLinearizableExpiryWindowStartsAtDefiniteFailure(t *testing.T) {
	h := &hb{}
	x, y := "jepsen/dl/x", "jepsen/dl/y"
	h.lock(0, x, 1)
	h.lock(1, x, 5) // process 0 has not released x
	h.acquire(0, wl(y))
	h.done(0, history.Acquire, history.Fail, "timeout") // session 0 alive here
	h.releaseInv(0, x)
	h.done(0, history.Release, history.Fail, "not_held")
	h.lost(0)
	h.release(1, x)
	cfg := Config{Workload: "deadlock", Fenced: true}
	if r := Linearizable(h.ev, cfg); r.OK() {
		t.Fatalf("double grant of x to two live sessions judged linearizable: %+v", r)
	}
}

// A client paused past its TTL near the end of the run (found by the
// full matrix: mutex, pause, 5 nodes) resumes after the run's deadline;
// its write is refused as stale and its release ends info (the context
// is gone), so it never learns its session expired. Meanwhile others
// were granted the lock with larger tokens. That is no violation: the
// session was last proven alive at its acquire, and may have expired any
// time after. Without the pause, or with the release acknowledged, it is
// one.
func TestPausedClientWithUnknownFateIsNotAViolation(t *testing.T) {
	h := &hb{}
	m := "jepsen/mutex"
	h.lock(6, m, 4000)
	h.res(6, history.ResRead, wg(m, 4000), 4000, 1, "")
	h.add(history.Event{Type: history.Info, Process: history.Nemesis, F: history.Start, Fault: "client-pause",
		Targets: []string{"process-6"}})
	h.sleep(15 * time.Second) // paused; its session expires
	// Tokens grow in grant order: each holder in turn.
	for _, g := range []struct {
		proc int
		tok  uint64
	}{{11, 4012}, {9, 4013}} {
		h.lock(g.proc, m, g.tok)
		h.res(g.proc, history.ResRead, wg(m, g.tok), g.tok, 0, "")
		h.res(g.proc, history.ResWrite, wg(m, g.tok), g.tok, 0, "")
		h.observe(4, m, held(g.proc, "write", g.tok))
		h.release(g.proc, m)
	}
	h.res(6, history.ResWrite, wg(m, 4000), 4000, 0, "stale")
	h.add(history.Event{Type: history.Info, Process: history.Nemesis, F: history.Stop, Fault: "client-pause",
		Targets: []string{"process-6"}})
	h.releaseInv(6, m)
	h.done(6, history.Release, history.Info, "context deadline exceeded")
	h.close(6, history.OK)
	cfg := Config{Workload: "mutex", Fenced: true}
	for _, r := range []Result{Safety(h.ev, cfg), Linearizable(h.ev, cfg)} {
		if !r.OK() {
			t.Errorf("%s: %s %v", r.Checker, r.Verdict, r.Anomalies)
		}
	}
	// The same history without the pause is a violation: a running
	// client notices a lost session before the server drops it.
	noPause := slices.DeleteFunc(slices.Clone(h.ev), func(e history.Event) bool { return e.Process == history.Nemesis })
	for _, r := range []Result{Safety(noPause, cfg), Linearizable(noPause, cfg)} {
		if r.OK() {
			t.Errorf("%s: unknown fate without a pause judged valid", r.Checker)
		}
	}
	// Nor does a pause excuse a release acknowledged after the others'
	// grants: the session was alive throughout.
	h2 := &hb{}
	h2.lock(6, m, 4000)
	h2.res(6, history.ResRead, wg(m, 4000), 4000, 1, "")
	h2.add(history.Event{Type: history.Info, Process: history.Nemesis, F: history.Start, Fault: "client-pause",
		Targets: []string{"process-6"}})
	h2.lock(11, m, 4012)
	h2.res(11, history.ResWrite, wg(m, 4012), 4012, 0, "")
	h2.release(11, m)
	h2.release(6, m)
	for _, r := range []Result{Safety(h2.ev, cfg), Linearizable(h2.ev, cfg)} {
		if r.OK() {
			t.Errorf("%s: double grant to a live session judged valid", r.Checker)
		}
	}
}

func TestSetFull(t *testing.T) {
	base := func(h *hb) {
		h.res(1, history.ResWrite, wg("a", 1), 1, 1, "")
		h.res(1, history.ResWrite, wg("a", 1), 2, 2, "")
		h.add(history.Event{Type: history.Invoke, Process: 2, F: history.ResWrite, Granted: []history.Granted{wg("a", 3)}, Value: 3})
		h.done(2, history.ResWrite, history.Info, "")
		h.res(4, history.ResWrite, wg("a", 0), 0, 4, "stale")
	}
	runCases(t, []histCase{
		{"all present, unknown recovered", func(h *hb) {
			base(h)
			h.finalRead(map[string][]int64{"a": {1, 2, 3}})
		}, true, ""},
		{"unknown absent", func(h *hb) {
			base(h)
			h.finalRead(map[string][]int64{"a": {1, 2}})
		}, true, ""},
		{"lost element", func(h *hb) {
			base(h)
			h.finalRead(map[string][]int64{"a": {1}})
		}, false, ""},
		{"duplicated element", func(h *hb) {
			base(h)
			h.finalRead(map[string][]int64{"a": {1, 2, 2}})
		}, false, ""},
		{"rejected element present", func(h *hb) {
			base(h)
			h.finalRead(map[string][]int64{"a": {1, 2, 4}})
		}, false, ""},
		{"never written element present", func(h *hb) {
			base(h)
			h.finalRead(map[string][]int64{"a": {1, 2, 99}})
		}, false, ""},
		{"element in the wrong register", func(h *hb) {
			base(h)
			h.finalRead(map[string][]int64{"a": {1}, "b": {2}})
		}, false, ""},
		{"no final read", base, false, Unknown},
	}, func(ev []history.Event) Result { return SetFull(ev, Config{}) })
}

func TestLiveness(t *testing.T) {
	cfg := Config{LivenessBound: time.Second}
	dl := Config{LivenessBound: time.Second, Workload: "deadlock"}
	cases := []struct {
		histCase
		cfg Config
	}{
		{histCase{"served", func(h *hb) {
			h.lock(1, "a", 1)
			h.done(1, history.Acquire, history.Fail, "timeout") // before the final phase: fine
			h.phaseFinal()
			h.lock(2, "a", 3)
			h.release(2, "a")
			h.lock(3, "a", 5)
			h.release(3, "a")
			h.lock(1, "a", 7)
		}, true, ""}, cfg},
		{histCase{"timeout in final phase", func(h *hb) {
			h.phaseFinal()
			h.lock(2, "a", 3)
			h.acquire(3, wl("a"))
			h.done(3, history.Acquire, history.Fail, "timeout")
		}, false, ""}, cfg},
		{histCase{"too slow", func(h *hb) {
			h.phaseFinal()
			h.acquire(2, wl("a"))
			h.sleep(2 * time.Second)
			h.granted(2, wg("a", 3))
		}, false, ""}, cfg},
		{histCase{"never served", func(h *hb) {
			h.phaseFinal()
			h.acquire(2, wl("a"))
		}, false, ""}, cfg},
		{histCase{"no final phase", func(h *hb) { h.lock(1, "a", 1) }, false, Unknown}, cfg},
		{histCase{"deadlock resolved", func(h *hb) {
			h.phaseFinal()
			h.lock(1, "a", 1)
			h.lock(2, "b", 2)
			h.acquire(1, wl("b"))
			h.acquire(2, wl("a"))
			h.done(2, history.Acquire, history.Fail, "deadlock")
			h.release(2, "b")
			h.granted(1, wg("b", 5))
		}, true, ""}, dl},
		{histCase{"deadlock not resolved", func(h *hb) {
			h.phaseFinal()
			h.lock(1, "a", 1)
			h.lock(2, "b", 2)
			h.acquire(1, wl("b"))
			h.acquire(2, wl("a"))
		}, false, ""}, dl},
	}
	for _, c := range cases {
		runCases(t, []histCase{c.histCase}, func(ev []history.Event) Result { return Liveness(ev, c.cfg) })
	}
	h := &hb{}
	h.phaseFinal()
	h.acquire(1, wl("a"))
	h.done(1, history.Acquire, history.Fail, "deadlock")
	h.lock(1, "a", 3)
	if r := Liveness(h.ev, dl); !r.OK() || r.Counts["deadlocks-resolved"] != 1 {
		t.Fatalf("deadlock count: %+v", r)
	}
}

// Every client of the run must be served after the heal. A worker whose
// session is lost in the final phase records only a lost event (its
// acquire returns before invoking) and is never retried: it invoked no
// final-phase acquire, yet it is a client that was not served.
func TestLivenessFlagsClientWithoutFinalAcquire(t *testing.T) {
	h := &hb{}
	h.lock(0, "jepsen/mutex", 1)
	h.release(0, "jepsen/mutex")
	h.lock(1, "jepsen/mutex", 2)
	h.release(1, "jepsen/mutex")
	h.phaseFinal()
	h.lost(1) // worker 1: session gone, no acquire invoked, never retried
	h.close(1, history.OK)
	h.lock(0, "jepsen/mutex", 3)
	h.release(0, "jepsen/mutex")
	r := Liveness(h.ev, Config{Workload: "mutex", Fenced: true, LivenessBound: time.Second})
	if r.OK() {
		t.Fatalf("client (process 1) that never acquired after the heal judged live: %+v", r)
	}
}

// An unresolved deadlock in the main phase, outside any fault: each
// process holds what the other waits for, both sessions alive, and both
// waits end "timeout" instead of one "deadlock". The final phase is
// fine, so only the deadlock rule of Liveness can flag it.
func TestUnresolvedDeadlockIsFlagged(t *testing.T) {
	h := &hb{}
	x, y := "jepsen/dl/x", "jepsen/dl/y"
	h.lock(0, x, 1)
	h.lock(1, y, 2)
	h.acquire(0, wl(y))
	h.acquire(1, wl(x))
	h.sleep(10 * time.Second)
	h.done(0, history.Acquire, history.Fail, "timeout")
	h.done(1, history.Acquire, history.Fail, "timeout")
	h.release(0, x)
	h.release(1, y)
	h.phaseFinal()
	h.lock(0, x, 5)
	h.lock(0, y, 6)
	h.release(0, y)
	h.release(0, x)
	h.lock(1, y, 7)
	h.lock(1, x, 8)
	h.release(1, x)
	h.release(1, y)
	cfg := Config{Workload: "deadlock", Fenced: true, LivenessBound: 30 * time.Second}
	for _, r := range All(h.ev, cfg) {
		if !r.OK() && r.Verdict != Unknown {
			return
		}
	}
	t.Fatalf("an unresolved deadlock (both waits timed out on a wait-for cycle) was not flagged by any checker")
}

func TestConvergence(t *testing.T) {
	n := func(name string, idx uint64, d, err string) NodeState {
		return NodeState{Node: name, AppliedIndex: idx, Digest: d, Err: err}
	}
	tests := []struct {
		name  string
		nodes []NodeState
		want  Verdict
	}{
		{"agree", []NodeState{n("n1", 10, "x", ""), n("n2", 10, "x", ""), n("n3", 10, "x", "")}, Valid},
		{"digest mismatch", []NodeState{n("n1", 10, "x", ""), n("n2", 10, "y", "")}, Invalid},
		{"index mismatch", []NodeState{n("n1", 10, "x", ""), n("n2", 9, "x", "")}, Invalid},
		{"unanswered", []NodeState{n("n1", 10, "x", ""), n("n2", 0, "", "timeout")}, Invalid},
		{"empty reports agree but prove nothing", []NodeState{n("n1", 0, "", ""), n("n2", 0, "", "")}, Invalid},
		{"none", nil, Unknown},
	}
	for _, tc := range tests {
		if r := Convergence(tc.nodes); r.Verdict != tc.want {
			t.Errorf("%s: %s, want %s (%v)", tc.name, r.Verdict, tc.want, r.Anomalies)
		}
	}
}
