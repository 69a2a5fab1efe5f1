package lockdtest

import (
	"os"
	"strconv"
)

// TimingEnv names the one switch for every test cluster's raft timing
// (lockd --raft-timing, raftnode.Config.Timing): set, it replaces each
// harness's own default, so that `make test-elections`
// (LOCKD_TEST_TIMING=0.05 with -cpu 1) makes leaders change mid-test in
// every package at once.
const TimingEnv = "LOCKD_TEST_TIMING"

// Timing is the raft timing a test cluster runs with: $LOCKD_TEST_TIMING
// when it is a positive number, def otherwise.
func Timing(def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(TimingEnv), 64); err == nil && v > 0 {
		return v
	}
	return def
}

// TimingFlag is Timing(def) as a --raft-timing argument.
func TimingFlag(def float64) string {
	return strconv.FormatFloat(Timing(def), 'g', -1, 64)
}

// ProvokedElections reports whether LOCKD_TEST_TIMING is set, so that a
// test that cannot hold while leaders change (it measures one leader's
// behaviour on purpose) can skip with its reason.
func ProvokedElections() bool {
	v, err := strconv.ParseFloat(os.Getenv(TimingEnv), 64)
	return err == nil && v > 0
}
