package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is lockd's GOGC when the environment sets none. The
// live heap is the lock table, small beside the garbage every request
// makes (JSON, msgpack, raft entries), so at Go's 100 the collector runs
// many times a second under load and takes CPU from the leader loop. 400
// lets the heap grow to five times the live table between collections;
// docs/performance.md has the measurement. GOGC (and GOMEMLIMIT, to cap
// the heap on a small machine) in the environment still rule.
const defaultGCPercent = 400

// tuneGC sets defaultGCPercent unless GOGC is set.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}
