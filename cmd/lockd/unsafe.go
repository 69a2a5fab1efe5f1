//go:build lockd_faults

package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/lockd/lockd/raftnode"
)

// The jepsen suite's flags (harness.go): this file is built only with
// the lockd_faults tag, into the image the suite runs (make jepsen-image).

func init() { harnessFlags = jepsenFlags }

// The --unsafe modes exist so that the Jepsen suite can prove its
// checkers catch a lock service that breaks a promise (negative
// controls). Two are this command's: unsafeNoConsensus makes every node
// bootstrap a one-voter cluster of its own and skip gossip, so each
// grants locks from its own table; unsafeNoFormatGate makes the leader
// write the newest log format whatever its voters' builds apply (no
// raftnode.Node.SetLogFormat), so an older voter in a rolling upgrade
// meets entries it cannot apply. The others are raftnode's
// (raftnode.Config.SetUnsafe).
const (
	unsafeNoConsensus  = "no-consensus"
	unsafeNoFormatGate = "no-format-gate"
)

// unsafeMode is one --unsafe mode and what it does (the flag's help, and
// the warning a node in it logs).
type unsafeMode struct{ name, does string }

// unsafeModes are the --unsafe modes.
var unsafeModes = []unsafeMode{
	{unsafeNoConsensus, "makes this node a cluster of its own: locks are not mutually exclusive across nodes"},
	{raftnode.UnsafeWallClock, "stamps commands with the leader's wall clock, which a clock step moves; it turns the clock hook on"},
	{raftnode.UnsafeLyingDisk, "acknowledges raft log writes that failed"},
	{unsafeNoFormatGate, "writes the newest log format whatever the voters' builds apply"},
	{raftnode.UnsafeStaleSnapshot, "makes every snapshot hold the state of the one before it"},
	{raftnode.UnsafeNoFsync, "acknowledges raft log writes before they are fsynced (--raft-log " + raftnode.LogBolt + " only)"},
	{raftnode.UnsafeNoHoldTTL, "ignores hold TTLs: holds last until released"},
	{raftnode.UnsafeStaleProclaim, "gives every proclaim to the name's current leader, whoever sent it"},
}

// The environment variables that set the flags' defaults, so that a
// compose file can switch them on for a whole cluster without changing
// every node's command line (the jepsen suite's does).
const (
	envUnsafe    = "LOCKD_UNSAFE"
	envClockHook = "LOCKD_TEST_CLOCK_HOOK" // 1: --test-clock-hook
)

// jepsenFlags defines --unsafe and --test-clock-hook (harnessFlags).
func jepsenFlags(fs *flag.FlagSet) func(*config) error {
	help := make([]string, len(unsafeModes))
	for i, m := range unsafeModes {
		help[i] = fmt.Sprintf("%q %s", m.name, m.does)
	}
	mode := fs.String("unsafe", os.Getenv(envUnsafe), "TESTING ONLY, breaks a guarantee: "+strings.Join(help, "; ")+
		" (default $"+envUnsafe+")")
	hook := fs.Bool("test-clock-hook", os.Getenv(envClockHook) == "1",
		"TESTING ONLY: operators may offset this node's wall clock with PUT /v1/debug/clock (the jepsen clock nemesis; default: $"+
			envClockHook+" is 1)")
	return func(c *config) error {
		c.harness.clockHook = *hook
		return c.harness.setUnsafe(*mode, c.RaftLog)
	}
}

// setUnsafe fills in h for --unsafe mode ("": none); raftLog is --raft-log.
func (h *harness) setUnsafe(mode, raftLog string) error {
	if mode == "" {
		return nil
	}
	i := slices.IndexFunc(unsafeModes, func(m unsafeMode) bool { return m.name == mode })
	if i < 0 {
		names := make([]string, len(unsafeModes))
		for i, m := range unsafeModes {
			names[i] = m.name
		}
		return fmt.Errorf("--unsafe %q: the modes are %q", mode, names)
	}
	if mode == raftnode.UnsafeNoFsync && raftLog != raftnode.LogBolt {
		return fmt.Errorf("--unsafe %s needs --raft-log %s", mode, raftnode.LogBolt)
	}
	h.warning = "UNSAFE: --unsafe " + mode + " " + unsafeModes[i].does
	switch mode {
	case unsafeNoConsensus:
		h.alone = true
	case unsafeNoFormatGate:
		h.ungated = true
	default:
		h.clockHook = h.clockHook || mode == raftnode.UnsafeWallClock
		h.node = func(cfg *raftnode.Config) error { return cfg.SetUnsafe(mode) }
	}
	return nil
}
