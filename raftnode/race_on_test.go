//go:build race

package raftnode

// raceEnabled: built with -race. A store that maps a file on a FUSE mount
// this process serves can deadlock under the race detector: a page fault
// on the mapping blocks a thread outside any system call, which a
// stop-the-world collection then waits for while the server goroutine
// that would answer the fault cannot run.
const raceEnabled = true
