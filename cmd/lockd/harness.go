package main

import (
	"flag"

	"github.com/lockd/lockd/raftnode"
)

// The jepsen suite's flags — --unsafe, whose modes break a guarantee on
// purpose (its negative controls), and --test-clock-hook, which lets an
// operator move this node's wall clock (its clock nemesis) — exist only
// in a build made for that suite: go build -tags lockd_faults (unsafe.go).
// A production lockd has neither flag, and nothing else sets a harness,
// so its nodes run as their other flags say.

// harness is what the jepsen suite's flags ask of a node; the zero
// harness asks nothing.
type harness struct {
	// alone makes the node a one-voter cluster of its own, without
	// gossip, as --dev does.
	alone bool
	// ungated writes the newest log format whatever the voters' builds
	// apply (no raftnode.Node.SetLogFormat).
	ungated bool
	// clockHook turns on PUT /v1/debug/clock (api.Config.ClockOffset).
	clockHook bool
	// node, if set, changes the raft node's configuration.
	node func(*raftnode.Config) error
	// warning, if set, is logged as an error when the node starts.
	warning string
}

// harnessFlags defines the jepsen suite's flags on fs and returns the
// function that, once they are parsed, checks them and fills in the
// config's harness. nil in a production build: no such flags.
var harnessFlags func(fs *flag.FlagSet) func(*config) error
