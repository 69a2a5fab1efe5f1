//go:build linux

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockHolders returns the sessions holding name ("" errors count as none).
func lockHolders(addr, name string) []string {
	var info struct {
		Holders []struct {
			Session string `json:"session"`
		} `json:"holders"`
	}
	if err := getJSON(addr, "/v1/locks/"+name, &info); err != nil {
		return nil
	}
	var s []string
	for _, h := range info.Holders {
		s = append(s, h.Session)
	}
	return s
}

func TestLockSerializesJobs(t *testing.T) {
	addr := startDev(t)
	dir := t.TempDir()
	job := `echo "start $LOCKD_FENCING_TOKEN" >> out; sleep 0.3; echo "end $LOCKD_FENCING_TOKEN" >> out`
	const n = 3
	var ps []*lockctlProc
	for range n {
		ps = append(ps, startLockctl(t, addr, dir, "lock", "jobs/x", "--", "sh", "-c", job))
	}
	for _, p := range ps {
		if code := p.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("exit %d, stderr: %s", code, &p.stderr)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("want %d lines, got:\n%s", 2*n, b)
	}
	var last uint64
	for i := 0; i < len(lines); i += 2 {
		start, end := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if start[0] != "start" || end[0] != "end" || start[1] != end[1] {
			t.Fatalf("jobs interleaved:\n%s", b)
		}
		tok, err := strconv.ParseUint(start[1], 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("fencing tokens not increasing (%q after %d):\n%s", start[1], last, b)
		}
		last = tok
	}
}

func TestLockEnvAndExitCode(t *testing.T) {
	addr := startDev(t)
	code, out, stderr := lockctl(t, addr, "lock", "jobs/env", "--", "sh", "-c",
		`echo "$LOCKD_LOCK $LOCKD_FENCING_TOKEN $LOCKD_SESSION"; exit 7`)
	if code != 7 {
		t.Fatalf("exit %d, want the command's 7; stderr: %s", code, stderr)
	}
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != "jobs/env" || f[1] == "0" || f[2] == "" {
		t.Fatalf("environment: %q", out)
	}
	if h := lockHolders(addr, "jobs/env"); len(h) != 0 {
		t.Fatalf("lock still held after the command: %v", h)
	}

	if code, _, stderr := lockctl(t, addr, "lock", "jobs/env", "--", "sh", "-c", "kill -TERM $$"); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("command killed by SIGTERM: exit %d, want 143; stderr: %s", code, stderr)
	}
	if code, _, _ := lockctl(t, addr, "lock", "jobs/env", "--", "no-such-command-xyz"); code != exitNotFound {
		t.Fatalf("missing command: exit %d, want %d", code, exitNotFound)
	}
	// One word with spaces is a shell command, as consul lock runs it.
	if code, out, stderr := lockctl(t, addr, "lock", "jobs/env", "--", `echo "$LOCKD_LOCK" && echo two`); code != 0 || out != "jobs/env\ntwo\n" {
		t.Fatalf("a shell command: exit %d, stdout %q, stderr %s", code, out, stderr)
	}
}

// TestLockWithoutCommandHoldsUntilInterrupted: as etcdctl lock, lock
// without a command prints the name and its token once held, holds it
// until SIGINT (exit 0) and then releases it.
func TestLockWithoutCommandHoldsUntilInterrupted(t *testing.T) {
	addr := startDev(t)
	p := startLockctl(t, addr, t.TempDir(), "lock", "jobs/hold")
	waitFor(t, 30*time.Second, "the held line on stdout", func() bool { return strings.HasSuffix(p.stdout.String(), "\n") })
	f := strings.Fields(p.stdout.String())
	if len(f) != 2 || f[0] != "jobs/hold" || f[1] == "0" {
		t.Fatalf("stdout %q, want the name and its fencing token", p.stdout.String())
	}
	if h := lockHolders(addr, "jobs/hold"); len(h) != 1 {
		t.Fatalf("holders of jobs/hold while lockctl holds it: %v", h)
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d after SIGINT, want 0; stderr: %s", code, &p.stderr)
	}
	if h := lockHolders(addr, "jobs/hold"); len(h) != 0 {
		t.Fatalf("jobs/hold still held after lockctl ended: %v", h)
	}
}

func TestLockWaitZeroOnHeldLock(t *testing.T) {
	addr := startDev(t)
	holder := startLockctl(t, addr, t.TempDir(), "lock", "jobs/held", "--", "sleep", "30")
	waitFor(t, 10*time.Second, "the first lockctl to hold jobs/held", func() bool { return len(lockHolders(addr, "jobs/held")) == 1 })
	sess := lockHolders(addr, "jobs/held")[0]

	start := time.Now()
	code, out, stderr := lockctl(t, addr, "lock", "--wait", "0", "jobs/held", "--", "echo", "ran")
	if code != exitNotAcquired {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitNotAcquired, stderr)
	}
	if out != "" {
		t.Fatalf("the command ran: %q", out)
	}
	if !strings.Contains(stderr, sess) || !strings.Contains(stderr, "sleep 30") {
		t.Fatalf("stderr does not name the holder %s: %s", sess, stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("--wait 0 took %v", d)
	}

	// Flags between NAME and "--" count; one after NAME without "--" is a
	// usage error, never run as the command after taking the lock.
	code, out, stderr = lockctl(t, addr, "lock", "jobs/held", "--wait", "0", "--", "echo", "ran")
	if code != exitNotAcquired || out != "" {
		t.Fatalf("--wait 0 between NAME and --: exit %d, out %q, want %d; stderr: %s", code, out, exitNotAcquired, stderr)
	}
	code, out, stderr = lockctl(t, addr, "lock", "jobs/free", "--wait", "0", "true")
	if code != exitUsage || out != "" || len(lockHolders(addr, "jobs/free")) != 0 {
		t.Fatalf("flag after NAME without --: exit %d, out %q, holders %v, want %d and no lock; stderr: %s",
			code, out, lockHolders(addr, "jobs/free"), exitUsage, stderr)
	}

	// A bounded wait gives up after about --wait.
	start = time.Now()
	code, _, stderr = lockctl(t, addr, "lock", "--wait", "500ms", "jobs/held", "--", "true")
	if d := time.Since(start); code != exitNotAcquired || d < 500*time.Millisecond {
		t.Fatalf("--wait 500ms: exit %d after %v; stderr: %s", code, d, stderr)
	}

	// SIGTERM ends the holder's command and lockctl alike, releasing the lock.
	_ = holder.cmd.Process.Signal(syscall.SIGTERM)
	if code := holder.wait(t, 10*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("holder: exit %d after SIGTERM; stderr: %s", code, &holder.stderr)
	}
	if code, out, stderr := lockctl(t, addr, "lock", "--wait", "0", "jobs/held", "--", "echo", "ran"); code != 0 || out != "ran\n" {
		t.Fatalf("after release: exit %d, out %q, stderr: %s", code, out, stderr)
	}
}

func TestLockSemaphoreLimit(t *testing.T) {
	addr := startDev(t)
	dir := t.TempDir()
	a := startLockctl(t, addr, dir, "lock", "--limit", "2", "jobs/sem", "--", "sleep", "30")
	b := startLockctl(t, addr, dir, "lock", "--limit", "2", "jobs/sem", "--", "sleep", "30")
	waitFor(t, 10*time.Second, "two holders of jobs/sem", func() bool { return len(lockHolders(addr, "jobs/sem")) == 2 })
	if code, _, stderr := lockctl(t, addr, "lock", "--limit", "2", "--wait", "0", "jobs/sem", "--", "true"); code != exitNotAcquired {
		t.Fatalf("third of a limit of 2: exit %d; stderr: %s", code, stderr)
	}
	if code, _, stderr := lockctl(t, addr, "lock", "--limit", "3", "--wait", "0", "jobs/sem", "--", "true"); code != exitDataErr {
		t.Fatalf("limit mismatch: exit %d, want %d; stderr: %s", code, exitDataErr, stderr)
	}
	_ = a.cmd.Process.Signal(syscall.SIGINT)
	a.wait(t, 10*time.Second)
	if code, _, stderr := lockctl(t, addr, "lock", "--limit", "2", "--wait", "0", "jobs/sem", "--", "true"); code != 0 {
		t.Fatalf("after one left: exit %d; stderr: %s", code, stderr)
	}
	_ = b.cmd.Process.Signal(syscall.SIGINT)
	b.wait(t, 10*time.Second)
}

func TestLockSessionLostKillsCommand(t *testing.T) {
	addr := startDev(t)
	dir := t.TempDir()
	// The background sleep checks that the whole job is stopped, not just sh.
	// Sessions of 3 s, as the jepsen workload's: with 1 s, a machine
	// loaded enough to starve lockctl for most of a second let the session
	// lapse while the test wanted it kept alive.
	const ttl = 3 * time.Second
	p := startLockctl(t, addr, dir, "lock", "--ttl", ttl.String(), "--grace", "1s", "jobs/lost", "--",
		"sh", "-c", `sleep 30 & echo $! > pid; wait`)
	waitFor(t, 10*time.Second, "lockctl to hold jobs/lost", func() bool {
		_, err := os.Stat(filepath.Join(dir, "pid"))
		return err == nil && len(lockHolders(addr, "jobs/lost")) == 1
	})
	b, _ := os.ReadFile(filepath.Join(dir, "pid"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %q", b)
	}
	sess := lockHolders(addr, "jobs/lost")[0]

	// Two TTLs pass: keepalives must keep it running.
	time.Sleep(2 * ttl)
	select {
	case <-p.done:
		t.Fatalf("lockctl exited %d while its session lived; stderr: %s", p.code, &p.stderr)
	default:
	}

	req, _ := http.NewRequest(http.MethodDelete, "http://"+addr+"/v1/sessions/"+sess, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	start := time.Now()
	if code := p.wait(t, 10*time.Second); code != exitSessionLost {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitSessionLost, &p.stderr)
	}
	// Its next keepalive (a third of the TTL) hears that the session is
	// gone: well before a TTL passes.
	if d := time.Since(start); d > ttl {
		t.Errorf("lockctl took %v to notice the lost session", d)
	}
	if !strings.Contains(p.stderr.String(), "session "+sess+" lost") {
		t.Errorf("stderr does not say the session was lost: %s", &p.stderr)
	}
	waitFor(t, 5*time.Second, "the job's background sleep to die", func() bool {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})
}

// TestLockKeepaliveExpiry freezes the server: with no keepalive answered
// for the TTL minus the margin, lockctl must stop the command on its own.
func TestLockKeepaliveExpiry(t *testing.T) {
	addr, lockd := startDevProc(t, "")
	dir := t.TempDir()
	p := startLockctl(t, addr, dir, "lock", "--ttl", "2s", "--grace", "500ms", "jobs/frozen", "--",
		"sh", "-c", `trap "" TERM; echo $$ > pid; while :; do sleep 0.1; done`)
	waitFor(t, 10*time.Second, "lockctl to hold jobs/frozen", func() bool {
		_, err := os.Stat(filepath.Join(dir, "pid"))
		return err == nil
	})
	if err := lockd.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The command ignores SIGTERM, so this also covers the SIGKILL after --grace.
	if code := p.wait(t, 10*time.Second); code != exitSessionLost {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitSessionLost, &p.stderr)
	}
	d := time.Since(start)
	if d > 5*time.Second {
		t.Errorf("took %v after the server froze (TTL 2s, grace 500ms)", d)
	}
	if !strings.Contains(p.stderr.String(), "SIGKILL") {
		t.Errorf("stderr does not mention the SIGKILL: %s", &p.stderr)
	}
	_ = lockd.Signal(syscall.SIGCONT)
}

// TestLockInterruptWhileWaiting: SIGINT while waiting gives up the wait
// (and the queued request) and exits 128+SIGINT without running the command.
func TestLockInterruptWhileWaiting(t *testing.T) {
	addr := startDev(t)
	dir := t.TempDir()
	holder := startLockctl(t, addr, dir, "lock", "jobs/intr", "--", "sleep", "30")
	waitFor(t, 10*time.Second, "a holder", func() bool { return len(lockHolders(addr, "jobs/intr")) == 1 })
	waiter := startLockctl(t, addr, dir, "lock", "jobs/intr", "--", "touch", "ran")
	waitFor(t, 10*time.Second, "a waiter", func() bool {
		var info struct{ Waiters []any }
		return getJSON(addr, "/v1/locks/jobs/intr", &info) == nil && len(info.Waiters) == 1
	})
	_ = waiter.cmd.Process.Signal(syscall.SIGINT)
	if code := waiter.wait(t, 10*time.Second); code != 128+int(syscall.SIGINT) {
		t.Fatalf("waiter: exit %d; stderr: %s", code, &waiter.stderr)
	}
	waitFor(t, 5*time.Second, "the waiter to leave the queue", func() bool {
		var info struct{ Waiters []any }
		return getJSON(addr, "/v1/locks/jobs/intr", &info) == nil && len(info.Waiters) == 0
	})
	_ = holder.cmd.Process.Signal(syscall.SIGINT)
	holder.wait(t, 10*time.Second)
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the interrupted waiter ran its command")
	}
}

// TestLockRead: readers share a name; a writer is kept out meanwhile.
func TestLockRead(t *testing.T) {
	addr := startDev(t)
	dir := t.TempDir()
	a := startLockctl(t, addr, dir, "lock", "--read", "jobs/r", "--", "sleep", "30")
	b := startLockctl(t, addr, dir, "lock", "--read", "jobs/r", "--", "sleep", "30")
	waitFor(t, 10*time.Second, "two readers of jobs/r", func() bool { return len(lockHolders(addr, "jobs/r")) == 2 })
	if code, _, stderr := lockctl(t, addr, "lock", "--wait", "0", "jobs/r", "--", "true"); code != exitNotAcquired {
		t.Fatalf("writer among readers: exit %d; stderr: %s", code, stderr)
	}
	for _, p := range []*lockctlProc{a, b} {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t, 10*time.Second)
	}
}
