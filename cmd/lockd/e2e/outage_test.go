package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runLockctl runs lockctl with args and returns its exit code, output and
// how long it took.
func runLockctl(t *testing.T, args ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, lockctlBin, args...)
	cmd.Env = append(os.Environ(), "LOCKD_ADDR=", "LOCKD_TOKEN=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("lockctl %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String(), took
}

// TestLockctlDuringAnOutage: with quorum lost, `lockctl lock --wait 0`
// fails within 12 s with the cluster's reason (no leader, exit 69), and
// `lockctl locks --stale` still lists the held lock (issue 12).
func TestLockctlDuringAnOutage(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.waitLeader(c.nodes, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.api.createSession(ctx, leader.httpAddr, "60s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.api.acquire(ctx, leader.httpAddr, s, "", "jobs/held", "0s"); err != nil {
		t.Fatal(err)
	}
	survivor := c.others(leader)[0]
	c.waitConverged(c.nodes, 20*time.Second)
	for _, nd := range c.others(survivor) {
		c.kill(nd)
	}
	code, _, stderr, took := runLockctl(t, "lock", "--addr", survivor.httpAddr, "--wait", "0", "jobs/other", "--", "true")
	if code != 69 || !strings.Contains(stderr, "no_leader") || took > 12*time.Second {
		t.Errorf("lock --wait 0 without quorum: exit %d after %v, stderr %q; want 69 (no leader) within 12s", code, took.Round(time.Millisecond), stderr)
	}
	code, out, stderr, took := runLockctl(t, "--addr", survivor.httpAddr, "locks", "--stale")
	if code != 0 || !strings.Contains(out, "jobs/held") || took > 12*time.Second {
		t.Errorf("locks --stale without quorum: exit %d after %v, out %q, stderr %q", code, took.Round(time.Millisecond), out, stderr)
	}
}
