package main

import (
	"strings"
	"testing"
	"time"
)

// secretOf picks the secret out of "lockctl acl ..." output.
func secretOf(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "secret: "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no secret in %q", out)
	return ""
}

// TestACLCommands: bootstrap, a token limited to jobs/, --token and
// LOCKD_TOKEN, 77 without a valid token, and revoke stopping a job.
func TestACLCommands(t *testing.T) {
	addr, _ := startDevProc(t, "", "--acl")
	code, out, stderr := lockctl(t, addr, "acl", "bootstrap")
	if code != exitOK {
		t.Fatalf("bootstrap: %d %s", code, stderr)
	}
	root := secretOf(t, out)
	if code, _, _ := lockctl(t, addr, "acl", "bootstrap"); code != exitNoPerm {
		t.Fatalf("second bootstrap: exit %d, want %d", code, exitNoPerm)
	}
	code, out, stderr = lockctl(t, addr, "acl", "token", "create", "--token", root, "--name", "jobs", "--rule", "jobs/=write")
	if code != exitOK {
		t.Fatalf("token create: %d %s", code, stderr)
	}
	jobs := secretOf(t, out)

	if code, _, stderr := lockctl(t, addr, "locks"); code != exitNoPerm || !strings.Contains(stderr, "unauthorized") {
		t.Fatalf("no token: exit %d (%s), want %d", code, stderr, exitNoPerm)
	}
	if code, _, _ := lockctl(t, addr, "lock", "--token", jobs, "--wait", "0", "other/x", "--", "true"); code != exitNoPerm {
		t.Fatalf("lock outside the token's prefix: exit %d, want %d", code, exitNoPerm)
	}
	t.Setenv("LOCKD_TOKEN", jobs)
	holder := startLockctl(t, addr, t.TempDir(), "lock", "--ttl", "3s", "jobs/x", "--", "sleep", "60")
	waitFor(t, 10*time.Second, "the job to hold jobs/x", func() bool {
		_, out, _ := lockctl(t, addr, "get", "jobs/x")
		return strings.Contains(out, "write")
	})
	if code, _, _ := lockctl(t, addr, "revoke", "jobs/x"); code != exitNoPerm {
		t.Fatalf("revoke with a write token: exit %d, want %d", code, exitNoPerm)
	}
	code, out, stderr = lockctl(t, addr, "revoke", "--token", root, "jobs/x")
	if code != exitOK || !strings.Contains(out, "revoked jobs/x") {
		t.Fatalf("revoke: %d %q %s", code, out, stderr)
	}
	if code := holder.wait(t, 20*time.Second); code != exitSessionLost {
		t.Fatalf("the job under a revoked lock: exit %d, want %d; stderr %s", code, exitSessionLost, &holder.stderr)
	}
	if !strings.Contains(holder.stderr.String(), "revoked") {
		t.Fatalf("lockctl lock does not say the lock was revoked: %s", &holder.stderr)
	}
}
