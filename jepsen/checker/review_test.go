package checker

import (
	"slices"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// A semaphore over-subscription (3 users inside a limit of 2, every
// session demonstrably alive: their releases were acknowledged and the
// process acquired again) is excused because process 1 was lost much
// later, after the window closed.
func TestReviewSemaphoreExcuseUsesLaterLoss(t *testing.T) {
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
// holds (the older holder's next use is rejected), so a double grant of
// a mutex to two live sessions, both acknowledged and both used at the
// resource, passes Safety.
func TestReviewSafetyBlindToDoubleGrantUnderFencing(t *testing.T) {
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

// A worker whose session is lost in the final phase records only a lost
// event (Acquire returns at alive() before invoking) and is never
// retried: Liveness does not count it, the run is valid although that
// client never acquired after the heal.
func TestReviewLivenessIgnoresClientWithoutFinalInvoke(t *testing.T) {
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

// An unresolved deadlock in the main phase: each process holds what the
// other waits for, both sessions alive, and both waits end "timeout"
// instead of one "deadlock". Nothing flags it (Liveness only looks at
// the final phase).
func TestReviewUnresolvedDeadlockNotFlagged(t *testing.T) {
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

// A definite "timeout" answer to an acquire proves the session was alive
// when the server applied it. Process 0 holds x, process 1 is granted x,
// then process 0's acquire of y (invoked after that grant) is answered
// timeout: process 0 still held x when process 1 got it. The expiry
// window inferred from the later not_held starts at the invoke of the
// last *ok* acquire/release only, so porcupine expires process 0 before
// process 1's grant and the double grant passes every checker.
func TestReviewExpiryWindowIgnoresDefiniteFailures(t *testing.T) {
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

// Control for TestReviewSafetyBlindToDoubleGrantUnderFencing: without the
// lost, Linearizable does catch the double grant.
func TestReviewDoubleGrantCaughtByLinearizable(t *testing.T) {
	h := &hb{}
	h.lock(1, "m", 5)
	h.lock(2, "m", 9)
	h.release(1, "m")
	h.release(2, "m")
	if r := Linearizable(h.ev, Config{Workload: "mutex", Fenced: true}); r.OK() {
		t.Fatalf("not caught: %+v", r)
	}
}

// Found by the full matrix (mutex, pause, 5 nodes): a client paused past
// its TTL near the end of the run resumes after the run's deadline; its
// write is refused as stale and its release ends info (the context is
// gone), so it never learns its session expired. Meanwhile others were
// granted the lock with larger tokens. Nothing shows a violation: the
// session was last proven alive at its acquire, and may have expired any
// time after. Safety and Linearizable used to flag it.
func TestPausedClientWithUnknownFateIsNotAViolation(t *testing.T) {
	h := &hb{}
	m := "jepsen/mutex"
	h.lock(6, m, 4000)
	h.res(6, history.ResRead, wg(m, 4000), 4000, 1, "")
	h.add(history.Event{Type: history.Info, Process: history.Nemesis, F: history.Start, Fault: "client-pause",
		Targets: []string{"process-6"}})
	h.sleep(15 * time.Second) // paused; its session expires
	for p, tok := range map[int]uint64{11: 4012, 9: 4013} {
		h.lock(p, m, tok)
		h.res(p, history.ResRead, wg(m, tok), tok, 0, "")
		h.res(p, history.ResWrite, wg(m, tok), tok, 0, "")
		h.observe(4, m, held(p, "write", tok))
		h.release(p, m)
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
