package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/history"
	"github.com/lockd/lockd/jepsen/nemesis"
)

// ev builds events for the control tests; times are in milliseconds.
type ev = history.Event

func at(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

// acquire is an acquire granted at okMS and a use of the resource under it.
func acquire(p, invokeMS, okMS int, name string, token uint64, holdTTL time.Duration) []ev {
	return append(grant(p, invokeMS, okMS, name, token, holdTTL),
		ev{Type: history.Invoke, Process: p, F: history.ResWrite, Time: at(okMS + 1), Granted: []history.Granted{{Name: name, Token: token}}})
}

// grant is an acquire granted at okMS, not used.
func grant(p, invokeMS, okMS int, name string, token uint64, holdTTL time.Duration) []ev {
	return []ev{
		{Type: history.Invoke, Process: p, F: history.Acquire, Time: at(invokeMS), HoldTTL: holdTTL,
			Locks: []history.Lock{{Name: name}}},
		{Type: history.OK, Process: p, F: history.Acquire, Time: at(okMS), HoldTTL: holdTTL,
			Granted: []history.Granted{{Name: name, Token: token}}},
	}
}

func release(p, ms int, name string) ev {
	return ev{Type: history.Invoke, Process: p, F: history.Release, Time: at(ms), Names: []string{name}}
}

// observe is the invoke of an observe read of name by p at ms.
func observe(p, ms int, name string) ev {
	return ev{Type: history.Invoke, Process: p, F: history.Observe, Time: at(ms), Names: []string{name}}
}

func stepped(name, token string) ev {
	return ev{Process: history.Nemesis, Type: history.Info, F: nemesis.Exercised, Targets: []string{name, token, "n1"}}
}

// powerLoss is the start of a power fault at ms, failed with err if set.
func powerLoss(fault string, ms int, err string) ev {
	return ev{Process: history.Nemesis, Type: history.Info, F: history.Start, Fault: fault, Time: at(ms),
		Targets: []string{"n1", "n2"}, Error: err}
}

// led is a fault start recorded ms after the fault began.
func led(e ev, ms int) ev {
	e.Lead = at(ms)
	return e
}

// proclaim is an event of p's proclaim of value under token.
func proclaim(p int, typ history.Type, token uint64, value string) ev {
	return ev{Type: typ, Process: p, F: history.Proclaim, Names: []string{"e"}, Token: token, Text: value}
}

func join(parts ...[]ev) []ev {
	var out []ev
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Each control is exercised by its condition and only by it: the cases
// "not" are runs where the condition did not happen.
func TestJudgeControl(t *testing.T) {
	ttl := 10 * time.Second
	lateMS := int((ttl + checker.HoldTTLSlack + 100*time.Millisecond) / time.Millisecond) // past a hold's latest end, without faults
	tests := []struct {
		name, control string
		events        []ev
		exercised     bool
	}{
		{"no-consensus: a second holder while the first holds", negNoConsensus,
			join(acquire(0, 0, 10, "a", 1, 0), acquire(1, 5, 20, "a", 1, 0), []ev{release(0, 30, "a")}), true},
		{"no-consensus: holds one after the other", negNoConsensus,
			join(acquire(0, 0, 10, "a", 1, 0), []ev{release(0, 15, "a")}, acquire(1, 5, 20, "a", 2, 0)), false},
		{"no-consensus: the second holder never used it", negNoConsensus,
			join(acquire(0, 0, 10, "a", 1, 0), grant(1, 5, 20, "a", 1, 0), []ev{release(0, 30, "a")}), false},
		{"no-consensus: the first holder's session was lost", negNoConsensus,
			join(acquire(0, 0, 10, "a", 1, 0), acquire(1, 5, 20, "a", 1, 0),
				[]ev{{Type: history.Info, Process: 0, F: history.Lost, Time: at(25)}, release(0, 30, "a")}), false},
		{"no-consensus: two names", negNoConsensus,
			join(acquire(0, 0, 10, "a", 1, 0), acquire(1, 5, 20, "b", 1, 0)), false},
		{"wall-clock: the stepped hold is overlapped", negWallClock,
			join(acquire(0, 0, 100, "a", 7, ttl), []ev{stepped("a", "7")}, acquire(1, 50, 300, "a", 8, ttl),
				[]ev{release(0, 2000, "a")}), true},
		{"wall-clock: released before the next grant", negWallClock,
			join(acquire(0, 0, 100, "a", 7, ttl), []ev{stepped("a", "7"), release(0, 200, "a")}, acquire(1, 50, 300, "a", 8, ttl)), false},
		{"wall-clock: next grant after the hold's own deadline", negWallClock,
			join(acquire(0, 0, 100, "a", 7, time.Second), []ev{stepped("a", "7")}, acquire(1, 50, 1500, "a", 8, ttl)), false},
		{"wall-clock: an overlap, but not of the stepped hold", negWallClock,
			join(acquire(0, 0, 100, "a", 7, ttl), []ev{stepped("a", "9")}, acquire(1, 50, 300, "a", 8, ttl)), false},
		{"lone-replacement: the lone node granted", negLoneReplacement,
			[]ev{{Process: history.Nemesis, Type: history.Info, F: nemesis.Exercised, Targets: []string{"n2", "alone granted a"}}}, true},
		{"lone-replacement: missed only", negLoneReplacement,
			[]ev{{Process: history.Nemesis, Type: history.Info, F: nemesis.Missed, Error: "n2 never led"}}, false},
		{"intruder-admin: accepted", negIntruderAdmin,
			[]ev{{Process: history.Intruder, Type: history.OK, F: history.Intrude, Session: "s1", Names: []string{"release", "a"}}}, true},
		{"intruder-admin: refused", negIntruderAdmin,
			[]ev{{Process: history.Intruder, Type: history.Fail, F: history.Intrude, Session: "s1"}}, false},
		{"unfenced: a smaller token used after a larger one", negUnfenced,
			[]ev{{Type: history.OK, F: history.ResWrite, Granted: []history.Granted{{Name: "a", Token: 3}}},
				{Type: history.OK, F: history.ResWrite, Granted: []history.Granted{{Name: "a", Token: 2}}}}, true},
		{"no-fsync: a majority lost power right after a grant", negNoFsync,
			join(acquire(0, 0, 100, "a", 1, 0), []ev{powerLoss(nemesis.FaultPowerLossMajority, 1500, "")}), true},
		{"no-fsync: one node lost power", negNoFsync,
			join(acquire(0, 0, 100, "a", 1, 0), []ev{powerLoss(nemesis.FaultPowerLoss, 1500, "")}), false},
		{"no-fsync: no grant before the power loss", negNoFsync,
			join([]ev{powerLoss(nemesis.FaultPowerLossMajority, 50, "")}, acquire(0, 0, 100, "a", 1, 0)), false},
		{"no-fsync: the last grant long before", negNoFsync,
			join(acquire(0, 0, 100, "a", 1, 0), []ev{powerLoss(nemesis.FaultPowerLossMajority, 9000, "")}), false},
		{"no-fsync: began right after a grant, recorded seconds later", negNoFsync,
			join(acquire(0, 0, 100, "a", 1, 0), []ev{led(powerLoss(nemesis.FaultPowerLossMajority, 6000, ""), 5400)}), true},
		{"no-fsync: the only grant came after the power went off", negNoFsync,
			join(acquire(0, 3000, 3100, "a", 1, 0), []ev{led(powerLoss(nemesis.FaultPowerLossMajority, 6000, ""), 5000)}), false},
		{"no-fsync: began long after the last grant", negNoFsync,
			join(acquire(0, 0, 100, "a", 1, 0), []ev{led(powerLoss(nemesis.FaultPowerLossMajority, 6000, ""), 1000)}), false},
		{"no-fsync: the power loss failed", negNoFsync,
			join(acquire(0, 0, 100, "a", 1, 0), []ev{powerLoss(nemesis.FaultPowerLossMajority, 1500, "docker: no such container")}), false},
		{"hold-past-ttl: a holder kept its grant past the bound and looked", negHoldPastTTL,
			join(grant(0, 0, 100, "a", 1, ttl), []ev{observe(0, 100+lateMS, "a"), release(0, 200+lateMS, "a")}), true},
		{"hold-past-ttl: its release was the look", negHoldPastTTL,
			join(grant(0, 0, 100, "a", 1, ttl), []ev{release(0, 100+lateMS, "a")}), true},
		{"hold-past-ttl: released in time", negHoldPastTTL,
			join(grant(0, 0, 100, "a", 1, ttl), []ev{release(0, 1000, "a"), observe(0, 100+lateMS, "a")}), false},
		{"hold-past-ttl: looked before the bound", negHoldPastTTL,
			join(grant(0, 0, 100, "a", 1, ttl), []ev{observe(0, 100+lateMS-200, "a"), release(0, 100+lateMS-100, "a")}), false},
		{"hold-past-ttl: its session closed first", negHoldPastTTL,
			join(grant(0, 0, 100, "a", 1, ttl), []ev{{Type: history.Invoke, Process: 0, F: history.Close, Time: at(1000)},
				observe(0, 100+lateMS, "a")}), false},
		{"hold-past-ttl: another name looked at", negHoldPastTTL,
			join(grant(0, 0, 100, "a", 1, ttl), []ev{observe(0, 100+lateMS, "b")}), false},
		{"hold-past-ttl: no hold TTL", negHoldPastTTL,
			join(grant(0, 0, 100, "a", 1, 0), []ev{release(0, 100+lateMS, "a")}), false},
		{"stale-proclaim: acknowledged for another hold", negStaleProclaim,
			[]ev{proclaim(0, history.Invoke, 7, "c0-2"), proclaim(0, history.OK, 9, "c0-2")}, true},
		{"stale-proclaim: acknowledged for its own hold", negStaleProclaim,
			[]ev{proclaim(0, history.Invoke, 7, "c0-2"), proclaim(0, history.OK, 7, "c0-2")}, false},
		{"stale-proclaim: refused", negStaleProclaim,
			[]ev{proclaim(0, history.Invoke, 7, "c0-2"), proclaim(0, history.Fail, 0, "")}, false},
		{"unfenced: tokens in order", negUnfenced,
			[]ev{{Type: history.OK, F: history.ResWrite, Granted: []history.Granted{{Name: "a", Token: 2}}},
				{Type: history.OK, F: history.ResWrite, Granted: []history.Granted{{Name: "a", Token: 3}}}}, false},
	}
	for _, tt := range tests {
		c := judgeControl(tt.control, tt.events)
		if c.Exercised != tt.exercised {
			t.Errorf("%s: exercised %v (evidence %q), want %v", tt.name, c.Exercised, c.Evidence, tt.exercised)
		}
	}
}

// A missed aimed attempt is reported with its reason.
func TestMissedAttemptsAreReported(t *testing.T) {
	c := judgeControl(negLoneReplacement, []ev{{Process: history.Nemesis, Type: history.Info, F: nemesis.Missed, Error: "n2 never led"}})
	if len(c.Missed) != 1 || !strings.Contains(c.Missed[0], "never led") {
		t.Fatalf("missed %q", c.Missed)
	}
}
