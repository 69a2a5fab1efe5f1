//go:build !race

package raftnode

// raceEnabled: built with -race (see race_on_test.go).
const raceEnabled = false
