//go:build !race

package faultfs

// raceEnabled: built with -race (see race_on_test.go).
const raceEnabled = false
