// Command lockjepsen runs lockd's Jepsen-style fault-injection suite
// against a real docker compose cluster: it builds the image, brings 3 or
// 5 nodes up, drives a workload with concurrent Go clients while a
// nemesis partitions, kills and pauses nodes (and clients), heals, checks
// the recorded history and writes a report to jepsen/results/<run>/. It
// exits non-zero unless every checker says valid (for a negative
// control, unless some checker says invalid). See docs/jepsen.md.
//
// Usage:
//
//	lockjepsen [run flags]             one run (lockjepsen -h lists the flags)
//	lockjepsen nemesis CMD [ARGS]      faults by hand (lockjepsen nemesis -h)
//	lockjepsen check RUN_DIR...        judge finished runs again (this build's checkers)
//	lockjepsen table RESULTS.json...   a markdown table of finished runs
package main

import (
	"fmt"
	"os"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		switch args[0] {
		case "nemesis":
			os.Exit(nemesisCmd(args[1:]))
		case "check":
			os.Exit(checkCmd(args[1:]))
		case "table":
			os.Exit(tableCmd(args[1:]))
		case "run":
			args = args[1:]
		}
	}
	code, err := runCmd(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockjepsen:", err)
	}
	os.Exit(code)
}
