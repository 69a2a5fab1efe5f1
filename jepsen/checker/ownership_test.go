package checker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

func attempt(idx int, typ history.Type, what, code string) []history.Event {
	inv := history.Event{Index: idx, Type: history.Invoke, Process: history.Intruder, F: history.Intrude, Session: "victim", Names: []string{what}}
	done := inv
	done.Index, done.Type, done.Error = idx+1, typ, code
	return []history.Event{inv, done}
}

// intrude is a whole intruder attempt through process victim's session.
func (h *hb) intrude(victim int, what string, typ history.Type, code string) {
	s := "s" + strconv.Itoa(victim)
	h.add(history.Event{Type: history.Invoke, Process: history.Intruder, Worker: -1, F: history.Intrude, Session: s, Names: []string{what}})
	h.add(history.Event{Type: typ, Process: history.Intruder, Worker: -1, F: history.Intrude, Session: s, Names: []string{what}, Error: code})
}

func (h *hb) fault(f, kind string) {
	h.add(history.Event{Type: history.Info, Process: history.Nemesis, F: f, Fault: kind, Targets: []string{"n1"}})
}

// Every kind of attempt refused as forbidden, or finding the session or
// request gone, is valid; attempts of unknown outcome are counted.
func TestOwnershipRefusedAttemptsAreValid(t *testing.T) {
	var refused []history.Event
	for i, what := range []string{"keepalive", "release", "surrender", "close", "acquire", "cancel"} {
		refused = append(refused, attempt(10*i, history.Fail, what, "forbidden")...)
	}
	refused = append(refused, attempt(100, history.Fail, "close", "session_not_found")...)
	refused = append(refused, attempt(105, history.Fail, "cancel", "request_not_found")...)
	refused = append(refused, attempt(110, history.Info, "release", "")...)
	r := Ownership(refused, Config{Intruder: true})
	if r.Verdict != Valid || r.Counts["forbidden"] != 6 || r.Counts["unknown"] != 1 || r.Counts["request_gone"] != 1 {
		t.Fatalf("refused attempts: %+v", r)
	}
	if r := Ownership(nil, Config{}); r.Verdict != Valid {
		t.Fatalf("a run without an intruder: %s", r.Verdict)
	}
	if !HadIntruder(refused) || HadIntruder(nil) {
		t.Fatal("HadIntruder")
	}
}

// An accepted attempt, or one refused for another reason than ownership
// (it got past the check), is a violation.
func TestOwnershipAcceptedAttemptIsInvalid(t *testing.T) {
	refused := attempt(0, history.Fail, "keepalive", "forbidden")
	for _, bad := range [][]history.Event{
		attempt(200, history.OK, "release", ""),           // accepted: another token changed the session
		attempt(200, history.Fail, "release", "not_held"), // got past the ownership check
		attempt(200, history.Fail, "cancel", "invalid_request"),
	} {
		r := Ownership(append(append([]history.Event{}, refused...), bad...), Config{Intruder: true})
		if r.Verdict != Invalid || len(r.Anomalies) != 1 {
			t.Fatalf("%+v judged %s: %v", bad[1], r.Verdict, r.Anomalies)
		}
	}
}

// An intruder that was never refused for ownership proved nothing: a
// session_not_found counts as one only if the worker's session lived on
// (lockd answers another token's session as one that does not exist).
func TestOwnershipNeverForbiddenIsUnknown(t *testing.T) {
	if r := Ownership(attempt(0, history.Fail, "close", "session_not_found"), Config{Intruder: true}); r.Verdict != Unknown {
		t.Fatalf("no forbidden attempt: %s", r.Verdict)
	}
	lived := append(attempt(0, history.Fail, "close", "session_not_found"),
		history.Event{Index: 5, Type: history.OK, Process: 3, F: history.Acquire, Session: "victim"})
	if r := Ownership(lived, Config{Intruder: true}); r.Verdict != Valid || r.Counts["refused_alive"] != 1 {
		t.Fatalf("not found while the session lived: %s %+v", r.Verdict, r.Counts)
	}
}

// A worker that loses its session after an intruder's close that was
// answered "forbidden", with no fault around, shows that the refusal did
// not hold: invalid, citing both events. The same loss during a fault,
// or after the worker's own close, is explained and valid.
func TestOwnershipUnexplainedLossAfterRefusedIntrusion(t *testing.T) {
	build := func(withFault bool) []history.Event {
		h := &hb{}
		h.lock(0, "jepsen/mutex", 1)
		h.release(0, "jepsen/mutex")
		if withFault {
			h.fault(history.Start, "partition-node")
		}
		h.intrude(0, "close", history.Fail, "forbidden")
		if withFault {
			h.fault(history.Stop, "partition-node")
		}
		h.sleep(3 * time.Second)
		h.lost(0)
		h.close(0, history.OK)
		return h.ev
	}
	r := Ownership(build(false), Config{Intruder: true})
	if r.Verdict != Invalid || r.Counts["losses_after_intrusion"] != 1 || !strings.Contains(r.Anomalies[0], "did not hold") {
		t.Fatalf("unexplained loss after a refused close: %+v", r)
	}
	if r := Ownership(build(true), Config{Intruder: true}); r.Verdict != Valid || r.Counts["losses"] != 1 || r.Counts["losses_unexplained"] != 0 {
		t.Fatalf("a loss during a partition is explained: %+v", r)
	}
}

// A fault that takes a while to apply (a majority's power loss is
// recorded once its nodes lead again) explains a loss that came while it
// was applied, before its start was recorded: the window opens at the
// start's Began, not its Time.
func TestOwnershipLossWhileAFaultWasApplied(t *testing.T) {
	build := func(lead time.Duration) []history.Event {
		h := &hb{}
		h.lock(0, "jepsen/mutex", 1)
		h.release(0, "jepsen/mutex")
		h.intrude(0, "close", history.Fail, "forbidden")
		h.sleep(3 * time.Second)
		h.lost(0)
		h.sleep(5 * time.Second)
		h.add(history.Event{Type: history.Info, Process: history.Nemesis, F: history.Start, Fault: "power-loss-majority",
			Targets: []string{"n1"}, Lead: lead})
		h.fault(history.Stop, "power-loss-majority")
		h.close(0, history.OK)
		return h.ev
	}
	if r := Ownership(build(0), Config{Intruder: true}); r.Verdict != Invalid {
		t.Fatalf("a loss before a fault began: %+v", r)
	}
	if r := Ownership(build(9*time.Second), Config{Intruder: true}); r.Verdict != Valid || r.Counts["losses_unexplained"] != 0 {
		t.Fatalf("a loss while the fault was applied: %+v", r)
	}
}

// The intruder-admin negative control: the management token's cancel of
// a worker's pending acquire is accepted and the worker's acquire ends
// "cancelled" — two violations, the acceptance and the loss.
func TestOwnershipAcceptedCancelShowsAsLoss(t *testing.T) {
	h := &hb{}
	h.intrude(1, "keepalive", history.Fail, "forbidden")
	h.lock(0, "jepsen/mutex", 1)
	h.acquire(1, wl("jepsen/mutex"))
	h.intrude(1, "cancel", history.OK, "")
	h.done(1, history.Acquire, history.Fail, "cancelled")
	r := Ownership(h.ev, Config{Intruder: true})
	if r.Verdict != Invalid || r.Counts["accepted"] != 1 || r.Counts["losses_after_intrusion"] != 1 {
		t.Fatalf("accepted cancel: %+v", r)
	}
	if !strings.Contains(r.Anomalies[1], "acquire ended cancelled") || !strings.Contains(r.Anomalies[1], "was accepted") {
		t.Fatalf("anomaly: %v", r.Anomalies)
	}
}

// A loss long after the last fault, and long after the last proof of
// life, is still explained when the fault lay within a TTL of it; one
// with only an attempt through another session, or an attempt made
// after the loss, is unexplained but nobody's intrusion: counted, valid.
func TestOwnershipLossWindows(t *testing.T) {
	h := &hb{}
	h.intrude(2, "close", history.Fail, "forbidden")
	h.lock(0, "jepsen/mutex", 1)
	h.fault(history.Start, "pause")
	h.sleep(4 * time.Second)
	h.fault(history.Stop, "pause")
	h.sleep(12 * time.Second) // past faultGrace, within TTL+faultGrace of the last proof
	h.lost(0)
	h.sleep(time.Minute)
	h.lock(1, "jepsen/mutex", 2)
	h.sleep(time.Minute)
	h.lost(1)
	h.intrude(1, "release", history.Fail, "forbidden")
	r := Ownership(h.ev, Config{Intruder: true, SessionTTL: 10 * time.Second})
	if r.Verdict != Valid || r.Counts["losses"] != 2 || r.Counts["losses_unexplained"] != 1 || r.Counts["losses_after_intrusion"] != 0 {
		t.Fatalf("windows: %+v", r)
	}
}
