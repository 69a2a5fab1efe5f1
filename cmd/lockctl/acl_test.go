//go:build linux

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
)

// secretOf picks the secret out of "lockctl acl ..." output.
func secretOf(t *testing.T, out string) string {
	t.Helper()
	return fieldOf(t, out, "secret")
}

// fieldOf picks "field: value" out of "lockctl acl ..." output.
func fieldOf(t *testing.T, out, field string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in %q", field, out)
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
	code, out, stderr = lockctl(t, addr, "locks")
	if code != exitOK || !strings.Contains(out, "jobs/x") || !strings.Contains(stderr, "only the names this token may read") {
		t.Fatalf("locks with a narrow token: exit %d, want the note that the listing is limited:\n%s%s", code, out, stderr)
	}
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

// TestACLTokensAndRevokedSession: flags before the command; acl tokens
// (and token list) never print secrets; revoke of a free name and of a
// Go client's hold (--json); session show lists the revocation; a
// forbidden call and a deleted token exit 77 saying which; --token wins
// over LOCKD_TOKEN.
func TestACLTokensAndRevokedSession(t *testing.T) {
	addr, _ := startDevProc(t, "", "--acl")
	_, out, _ := lockctl(t, addr, "acl", "bootstrap")
	root := secretOf(t, out)
	code, out, stderr := lockctl(t, addr, "--token", root, "acl", "token", "create", "--name", "ci", "--rule", "jobs/=write", "--rule", "=read")
	if code != exitOK {
		t.Fatalf("token create: %d %s", code, stderr)
	}
	ci, ciID := secretOf(t, out), fieldOf(t, out, "id")
	for _, args := range [][]string{{"acl", "tokens"}, {"acl", "token", "list"}, {"acl", "tokens", "--json"}} {
		code, out, stderr := lockctl(t, addr, append([]string{"--token", root}, args...)...)
		if code != exitOK || !strings.Contains(out, ciID) || strings.Contains(out, ci) || strings.Contains(out, root) {
			t.Fatalf("%q: exit %d, %q %s (want ids, no secrets)", args, code, out, stderr)
		}
	}
	if code, out, _ := lockctl(t, addr, "--token", root, "revoke", "jobs/free"); code != exitOK || !strings.Contains(out, "nobody held jobs/free") {
		t.Fatalf("revoke of a free name: %d %q", code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.NewWith([]string{addr}, client.WithToken(ci))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	g, err := s.Lock(ctx, "jobs/r")
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr = lockctl(t, addr, "--token", root, "--json", "revoke", "jobs/r")
	var ans struct{ Revoked []client.RevokedHold }
	if code != exitOK || json.Unmarshal([]byte(out), &ans) != nil || len(ans.Revoked) != 1 ||
		ans.Revoked[0] != (client.RevokedHold{Session: s.ID(), Name: "jobs/r", Token: g.Token}) {
		t.Fatalf("revoke --json: %d %q %s", code, out, stderr)
	}
	t.Setenv("LOCKD_TOKEN", ci)
	if code, out, stderr := lockctl(t, addr, "session", "show", s.ID()); code != exitOK || !strings.Contains(out, "Revoked:") || !strings.Contains(out, "jobs/r") {
		t.Fatalf("session show after the revoke: %d %q %s", code, out, stderr)
	}
	if code, _, stderr := lockctl(t, addr, "acl", "tokens"); code != exitNoPerm || !strings.Contains(stderr, "forbidden") {
		t.Fatalf("acl tokens with a write token: %d %s, want %d forbidden", code, stderr, exitNoPerm)
	}
	if code, out, stderr := lockctl(t, addr, "--token", root, "acl", "token", "delete", ciID); code != exitOK || !strings.Contains(out, ciID) {
		t.Fatalf("token delete: %d %q %s", code, out, stderr)
	}
	if code, _, stderr := lockctl(t, addr, "locks"); code != exitNoPerm || !strings.Contains(stderr, "unauthorized") {
		t.Fatalf("LOCKD_TOKEN of a deleted token: %d %s, want %d unauthorized", code, stderr, exitNoPerm)
	}
	if code, _, stderr := lockctl(t, addr, "locks", "--token", root); code != exitOK {
		t.Fatalf("--token over a stale LOCKD_TOKEN: %d %s", code, stderr)
	}
}
