//go:build !lockd_faults

package main

import (
	"strings"
	"testing"
)

// A production build has none of the jepsen suite's flags (harness.go),
// and their environment variables change nothing.
func TestNoHarnessFlags(t *testing.T) {
	const base = "--node-id n1 --data-dir /d "
	for _, args := range []string{base + "--unsafe no-consensus", base + "--test-clock-hook"} {
		if _, err := parseFlags(strings.Fields(args)); err == nil || !strings.Contains(err.Error(), "flag provided but not defined") {
			t.Errorf("parseFlags(%q): %v, want an unknown flag", args, err)
		}
	}
	t.Setenv("LOCKD_UNSAFE", "no-consensus")
	t.Setenv("LOCKD_TEST_CLOCK_HOOK", "1")
	c, err := parseFlags(strings.Fields(base))
	if err != nil {
		t.Fatal(err)
	}
	if h := c.harness; h.alone || h.ungated || h.clockHook || h.node != nil || h.warning != "" {
		t.Fatalf("harness %+v from the environment", h)
	}
}
