//go:build race

package fsm

// raceEnabled shortens the long determinism runs under the race detector,
// which slows lockstate's reflection-based Digest about tenfold and adds
// nothing to single-goroutine determinism checks.
const raceEnabled = true
