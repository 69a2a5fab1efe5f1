//go:build lockd_faults

package main

import (
	"strings"
	"testing"

	"github.com/lockd/lockd/raftnode"
)

// The jepsen suite's flags, in the build made for it (unsafe.go).
func TestUnsafeFlags(t *testing.T) {
	const base = "--node-id n1 --data-dir /d "
	for _, tc := range []struct {
		args                       string
		alone, ungated, hook, node bool
		wantErr                    string // "" means accepted; else a part of the error
	}{
		{args: base},
		{args: base + "--test-clock-hook", hook: true},
		{args: base + "--unsafe no-consensus", alone: true},
		{args: base + "--unsafe no-format-gate", ungated: true},
		{args: base + "--unsafe wall-clock", hook: true, node: true},
		{args: base + "--unsafe lying-disk", node: true},
		{args: base + "--unsafe stale-snapshot", node: true},
		{args: base + "--unsafe no-hold-ttl", node: true},
		{args: base + "--unsafe stale-proclaim", node: true},
		{args: base + "--unsafe no-fsync --raft-log bolt", node: true},
		{args: base + "--unsafe no-fsync --raft-log wal", wantErr: "needs --raft-log bolt"},
		{args: base + "--unsafe no-fsync", wantErr: "needs --raft-log bolt"},
		{args: base + "--unsafe yes", wantErr: `the modes are ["no-consensus" "wall-clock"`},
	} {
		t.Run(tc.args, func(t *testing.T) {
			c, err := parseFlags(strings.Fields(tc.args))
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			h := c.harness
			if h.alone != tc.alone || h.ungated != tc.ungated || h.clockHook != tc.hook || (h.node != nil) != tc.node {
				t.Fatalf("harness %+v", h)
			}
			if (h.warning != "") != strings.Contains(tc.args, "--unsafe") {
				t.Errorf("warning %q", h.warning)
			}
			if h.node != nil {
				var cfg raftnode.Config
				if err := h.node(&cfg); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestUnsafeFromEnvironment(t *testing.T) {
	t.Setenv(envUnsafe, unsafeNoConsensus)
	t.Setenv(envClockHook, "1")
	c, err := parseFlags(strings.Fields("--node-id n1 --data-dir /d"))
	if err != nil || !c.harness.alone || !c.harness.clockHook {
		t.Fatalf("from the environment: %+v, %v", c.harness, err)
	}
	t.Setenv(envUnsafe, "")
	t.Setenv(envClockHook, "")
	if c, err = parseFlags(strings.Fields("--node-id n1 --data-dir /d")); err != nil || c.harness.alone || c.harness.clockHook {
		t.Fatalf("by default: %+v, %v", c.harness, err)
	}
}

// A node alone runs no gossip: a public address needs no gossip key.
func TestUnsafeNoConsensusHasNoGossipToKey(t *testing.T) {
	args := "--node-id n1 --data-dir /d --http-addr 10.0.0.1:7001 --raft-addr 10.0.0.1:7101 --gossip-addr 10.0.0.1:7201 " +
		"--tls-ca ca.pem --tls-cert n1.pem --tls-key n1-key.pem "
	if _, err := parseFlags(strings.Fields(args)); err == nil || !strings.Contains(err.Error(), "--gossip-key") {
		t.Fatalf("without --unsafe: %v, want the gossip key asked for", err)
	}
	if _, err := parseFlags(strings.Fields(args + "--unsafe no-consensus")); err != nil {
		t.Fatal(err)
	}
}
