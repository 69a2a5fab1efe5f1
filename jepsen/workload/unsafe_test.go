//go:build linux && lockd_faults

package workload_test

import (
	"testing"

	"github.com/lockd/lockd/jepsen/checker"
)

// Against lockd --unsafe no-hold-ttl (the jepsen suite's build), which
// keeps holds past their TTL, the hold-ttl checker flags a holder that
// overstays its grant.
func TestUnsafeHoldPastTTLIsCaught(t *testing.T) {
	holdTTL, _, _ := holdTTLRun(t, "--unsafe", "no-hold-ttl")
	if holdTTL.Verdict != checker.Invalid {
		t.Fatalf("hold-ttl %s %v, want invalid", holdTTL.Verdict, holdTTL.Counts)
	}
	t.Logf("no-hold-ttl flagged: %v", holdTTL.Anomalies[0])
}

// Against lockd --unsafe stale-proclaim, which gives a deposed leader's
// proclaim to the leader after it, the election checker flags the value
// shown under the new leader's token.
func TestUnsafeStaleProclaimIsCaught(t *testing.T) {
	election, _, _ := electionRun(t, "--unsafe", "stale-proclaim")
	if election.Verdict != checker.Invalid {
		t.Fatalf("election %s %v, want invalid", election.Verdict, election.Counts)
	}
	t.Logf("stale-proclaim flagged: %v", election.Anomalies[0])
}
