//go:build linux

// Package e2e runs real lockd processes on loopback and drives them only
// through the HTTP API: cluster formation, leader loss, session expiry,
// restarts and quorum loss.
//
// TestMain builds cmd/lockd once (without -race: the race detector covers
// the test process only). Every test starts its own cluster with fresh
// data dirs and free ports and kills every process it started in
// t.Cleanup, so tests that mostly wait (a paused leader, a session's
// expiry, an outage) run in parallel (t.Parallel) and the package's time
// is not the sum of their waits. Processes are started from one OS thread that never exits,
// with PR_SET_PDEATHSIG=SIGKILL, so even a test binary that dies (a
// -timeout panic, a SIGKILL) takes its lockd children with it.
//
// Environment:
//
//	LOCKD_TEST_TIMING      --raft-timing for every node (default 1, production)
//	LOCKD_E2E_LOG_LEVEL    --log-level for every node (default info)
//	LOCKD_E2E_LOGS=1       print every node's log tail even when a test passes
//	LOCKD_E2E_LONG=1       also run the slow snapshot catch-up test (~5 min)
package e2e

import (
	"testing"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
)

// lockdBin and lockctlBin are the binaries TestMain built; empty in
// -short mode.
var lockdBin, lockctlBin string

func TestMain(m *testing.M) {
	lockdtest.Main(m, "e2e", map[string]*string{"cmd/lockd": &lockdBin, "cmd/lockctl": &lockctlBin})
}

// needBinary skips the test in -short mode (no binary was built).
func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() || lockdBin == "" {
		t.Skip("e2e: real lockd processes; skipped with -short")
	}
}
