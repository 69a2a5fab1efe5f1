package checker

import (
	"testing"

	"github.com/lockd/lockd/jepsen/history"
)

func intrusion(idx int, typ history.Type, what, code string) []history.Event {
	inv := history.Event{Index: idx, Type: history.Invoke, Process: history.Intruder, F: history.Intrude, Session: "victim", Names: []string{what}}
	done := inv
	done.Index, done.Type, done.Error = idx+1, typ, code
	return []history.Event{inv, done}
}

func TestOwnership(t *testing.T) {
	var refused []history.Event
	for i, what := range []string{"keepalive", "release", "surrender", "close", "acquire"} {
		refused = append(refused, intrusion(10*i, history.Fail, what, "forbidden")...)
	}
	refused = append(refused, intrusion(100, history.Fail, "close", "session_not_found")...)
	refused = append(refused, intrusion(110, history.Info, "release", "")...)
	cfg := Config{Intruder: true}
	if r := Ownership(refused, cfg); r.Verdict != Valid || r.Counts["forbidden"] != 5 || r.Counts["unknown"] != 1 {
		t.Fatalf("refused attempts: %+v", r)
	}
	for _, bad := range [][]history.Event{
		intrusion(200, history.OK, "release", ""),           // accepted: another token changed the session
		intrusion(200, history.Fail, "release", "not_held"), // got past the ownership check
	} {
		if r := Ownership(append(append([]history.Event{}, refused...), bad...), cfg); r.Verdict != Invalid {
			t.Fatalf("%+v judged %s", bad[1], r.Verdict)
		}
	}
	// An intruder that was never refused proved nothing.
	if r := Ownership(intrusion(0, history.Fail, "close", "session_not_found"), cfg); r.Verdict != Unknown {
		t.Fatalf("no forbidden attempt: %s", r.Verdict)
	}
	if r := Ownership(nil, Config{}); r.Verdict != Valid {
		t.Fatalf("a run without an intruder: %s", r.Verdict)
	}
	if !HadIntruder(refused) || HadIntruder(nil) {
		t.Fatal("HadIntruder")
	}
}
