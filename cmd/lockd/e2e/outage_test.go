package e2e

import (
	"bytes"
	"context"
	"fmt"
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
// `lockctl locks --stale` still lists the held lock.
func TestLockctlDuringAnOutage(t *testing.T) {
	t.Parallel() // mostly waits (see main_test.go)
	c := startCluster(t, 3)
	leader := c.waitLeader(c.nodes, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := must(t, "create session", func(ctx context.Context) (string, error) {
		return c.api.createSession(ctx, leader.httpAddr, "60s")
	})
	must(t, "acquire jobs/held", func(ctx context.Context) (*acquireView, error) {
		return c.api.acquire(ctx, leader.httpAddr, s, "", "jobs/held", "0s")
	})
	survivor := c.others(leader)[0]
	c.waitConverged(c.nodes, 20*time.Second)
	for _, nd := range c.others(survivor) {
		c.kill(nd)
	}
	code, _, stderr, took := runLockctl(t, "lock", "--addr", survivor.httpAddr, "--wait", "0", "jobs/other", "--", "true")
	// How fast the answer comes is logged, not asserted: this machine is shared.
	t.Logf("lock --wait 0 without quorum: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 69 || !strings.Contains(stderr, "no_leader") {
		t.Errorf("lock --wait 0 without quorum: exit %d, stderr %q; want 69 (no leader)", code, stderr)
	}
	// Once the survivor's gossip has seen the others go, the reason is one
	// sentence of its view, whichever addresses lockctl was given.
	eventually(t, 60*time.Second, "the survivor to see the others gone", func() (bool, string) {
		st, err := c.api.status(ctx, survivor.httpAddr)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if m.ID != survivor.id && m.Status == "alive" {
				return false, fmt.Sprintf("%+v", st.Members)
			}
		}
		return true, ""
	})
	want := "no leader: 1 of 3 voters reachable (" + survivor.id + "); a majority of 2 is needed"
	for _, addrs := range []string{survivor.httpAddr, strings.Join(addrs(c.nodes...), ",")} {
		code, _, stderr, took := runLockctl(t, "lock", "--addr", addrs, "--wait", "0", "jobs/other", "--", "true")
		t.Logf("lock --addr %s --wait 0 without quorum: exit %d after %v", addrs, code, took.Round(time.Millisecond))
		if code != 69 || !strings.Contains(stderr, want) {
			t.Errorf("lock --addr %s without quorum: exit %d, stderr %q; want 69 and %q", addrs, code, stderr, want)
		}
		for _, internal := range []string{"*lockstate", "raftnode:", "context deadline"} {
			if strings.Contains(stderr, internal) {
				t.Errorf("lock --addr %s: %q reaches the user: %s", addrs, internal, stderr)
			}
		}
	}
	code, _, stderr, took = runLockctl(t, "lock", "--addr", survivor.httpAddr, "--timeout", "4s", "--wait", "0", "jobs/other", "--", "true")
	t.Logf("lock --timeout 4s --wait 0 without quorum: exit %d after %v: %s", code, took.Round(time.Millisecond), stderr)
	code, out, stderr, took := runLockctl(t, "--addr", survivor.httpAddr, "locks", "--stale")
	t.Logf("locks --stale without quorum: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 0 || !strings.Contains(out, "jobs/held") {
		t.Errorf("locks --stale without quorum: exit %d, out %q, stderr %q", code, out, stderr)
	}
}

// TestMetrics: /metrics has the table's _total counters, raft's commit
// time and leader-change counter (go-metrics through lockd's raftSink),
// and waits apart from request latency.
func TestMetrics(t *testing.T) {
	c := startCluster(t, 1)
	leader := c.waitLeader(c.nodes, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.api.createSession(ctx, leader.httpAddr, "30s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.api.acquire(ctx, leader.httpAddr, s, "", "jobs/m", "1s"); err != nil {
		t.Fatal(err)
	}
	resp, err := c.api.hc.Get("http://" + leader.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	text := b.String()
	for _, want := range []string{"lockd_grants_total 1", "lockd_handoffs_total", "lockd_timeouts_total", "lockd_deadlocks_total{outcome=\"abort\"}",
		"lockd_session_expiries_total", "lockd_cancels_total", "lockd_raft_commitTime_count", "lockd_raft_state_leader 1",
		`lockd_http_wait_duration_seconds_count{code="200",route="POST /v1/acquire"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, `lockd_http_request_duration_seconds_count{code="200",route="POST /v1/acquire"}`) {
		t.Error("a waiting acquire is in the request-latency histogram")
	}
}
