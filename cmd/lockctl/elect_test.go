//go:build linux

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readFile returns the trimmed content of dir/name, "" when it does not
// exist (yet).
func readFile(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// lockWaiters returns how many requests wait for name.
func lockWaiters(addr, name string) int {
	var info struct{ Waiters []any }
	if getJSON(addr, "/v1/locks/"+name, &info) != nil {
		return 0
	}
	return len(info.Waiters)
}

// electJob is a command for lockctl elect: it writes its environment to
// ID.env, then runs until ID.stop exists (a background child too, whose
// pid it writes to ID.pid, to check that the whole job is stopped).
func electJob(id string) []string {
	return []string{"sh", "-c", `echo "$LOCKD_LOCK $LOCKD_FENCING_TOKEN $LOCKD_SESSION $LOCKD_VALUE" > ` + id + `.env; ` +
		`sleep 30 & echo $! > ` + id + `.pid; while [ ! -e ` + id + `.stop ]; do sleep 0.05; done; kill $!`}
}

// TestElectRunsOnlyWhileElected: three lockctl elect campaign for one
// name. The first runs its command with the election's environment while
// the others wait as candidates without running theirs; lockctl leader,
// get and locks show its value. An operator's revoke stops its command
// (exit 74) and elects the second, with a larger token; the second's
// command exits 0, lockctl exits 0 and the third is elected; deleting the
// third's session stops its command (exit 74); then nobody leads.
func TestElectRunsOnlyWhileElected(t *testing.T) {
	addr := startDev(t)
	dir := t.TempDir()
	const name = "svc/elect"
	elect := func(id string) *lockctlProc {
		args := append([]string{"elect", "--ttl", "3s", "--grace", "1s", name, "--value", "10.0.0." + id + ":80", "--"}, electJob(id)...)
		return startLockctl(t, addr, dir, args...)
	}
	a := elect("1")
	waitFor(t, 10*time.Second, "the first candidate's command", func() bool { return readFile(dir, "1.pid") != "" })
	env := strings.Fields(readFile(dir, "1.env"))
	if len(env) != 4 || env[0] != name || env[1] == "0" || env[2] != lockHolders(addr, name)[0] || env[3] != "10.0.0.1:80" {
		t.Fatalf("environment of the leader's command: %q", env)
	}
	tokenA, _ := strconv.ParseUint(env[1], 10, 64)
	b := elect("2")
	waitFor(t, 10*time.Second, "the second candidate to queue", func() bool { return lockWaiters(addr, name) == 1 })
	c := elect("3")
	waitFor(t, 10*time.Second, "the third candidate to queue", func() bool { return lockWaiters(addr, name) == 2 })

	code, out, stderr := lockctl(t, addr, "leader", name)
	if code != 0 || !strings.Contains(out, "Value:  10.0.0.1:80") || !strings.Contains(out, "Token:  "+env[1]) {
		t.Fatalf("leader: exit %d\n%s%s", code, out, stderr)
	}
	if _, out, _ := lockctl(t, addr, "get", name); !strings.Contains(out, "VALUE") || !strings.Contains(out, "10.0.0.1:80") {
		t.Fatalf("get does not show the value:\n%s", out)
	}
	if _, out, _ := lockctl(t, addr, "locks"); !strings.Contains(out, "VALUE") || !strings.Contains(out, "10.0.0.1:80") {
		t.Fatalf("locks does not show the value:\n%s", out)
	}
	if code, _, stderr := lockctl(t, addr, "elect", "--wait", "0", "--value", "x", name, "--", "touch", "ran"); code != exitNotAcquired ||
		!strings.Contains(stderr, "not elected") || !strings.Contains(stderr, `value "10.0.0.1:80"`) {
		t.Fatalf("elect --wait 0 while led: exit %d, stderr %s", code, stderr)
	}

	// The revoke: the first's job is stopped, the second is elected.
	if code, _, stderr := lockctl(t, addr, "revoke", name); code != 0 {
		t.Fatalf("revoke: exit %d: %s", code, stderr)
	}
	if code := a.wait(t, 10*time.Second); code != exitSessionLost || !strings.Contains(a.stderr.String(), "revoked") {
		t.Fatalf("revoked leader: exit %d, want %d; stderr: %s", code, exitSessionLost, &a.stderr)
	}
	pidA, _ := strconv.Atoi(readFile(dir, "1.pid"))
	waitFor(t, 5*time.Second, "the revoked leader's background job to die", func() bool { return syscall.Kill(pidA, 0) == syscall.ESRCH })
	waitFor(t, 10*time.Second, "the second candidate's command", func() bool { return readFile(dir, "2.pid") != "" })
	if readFile(dir, "3.env") != "" {
		t.Fatal("the third candidate ran its command while the second leads")
	}
	tokenB, _ := strconv.ParseUint(strings.Fields(readFile(dir, "2.env"))[1], 10, 64)
	if tokenB <= tokenA {
		t.Fatalf("second leader's token %d not above the first's %d", tokenB, tokenA)
	}
	code, out, _ = lockctl(t, addr, "leader", "--json", name)
	var l leaderLine
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || l.Leader == nil || l.Leader.Value != "10.0.0.2:80" || l.Leader.Token != tokenB {
		t.Fatalf("leader --json after the revoke: exit %d: %s", code, out)
	}

	// The second's command ends by itself: lockctl exits 0, the third leads.
	if err := os.WriteFile(filepath.Join(dir, "2.stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := b.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("second: exit %d; stderr: %s", code, &b.stderr)
	}
	waitFor(t, 10*time.Second, "the third candidate's command", func() bool { return readFile(dir, "3.pid") != "" })

	// Its session is deleted: the command is stopped.
	sess := strings.Fields(readFile(dir, "3.env"))[2]
	req, _ := http.NewRequest(http.MethodDelete, "http://"+addr+"/v1/sessions/"+sess, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := c.wait(t, 10*time.Second); code != exitSessionLost || !strings.Contains(c.stderr.String(), "session "+sess+" lost") {
		t.Fatalf("third after its session was deleted: exit %d; stderr: %s", code, &c.stderr)
	}
	if code, out, stderr := lockctl(t, addr, "leader", name); code != exitFalse || out != "" || !strings.Contains(stderr, "nobody leads") {
		t.Fatalf("leader of nobody: exit %d, %q, %s", code, out, stderr)
	}
	// A value over 4096 bytes is refused before anything runs.
	big := startLockctl(t, addr, dir, "elect", "--value", strings.Repeat("x", 5000), name, "--", "touch", "big")
	code = big.wait(t, 10*time.Second)
	if _, err := os.Stat(filepath.Join(dir, "big")); code != exitDataErr || err == nil {
		t.Fatalf("5000-byte value: exit %d (want %d), command ran: %v; stderr: %s", code, exitDataErr, err == nil, &big.stderr)
	}
}

// TestLeaderWatch: lockctl leader --watch prints that nobody leads, then
// the first leader, its proclaimed value under the same token, and the
// next leader with a larger token once the first releases — one line each.
func TestLeaderWatch(t *testing.T) {
	addr := startDev(t)
	var s1, s2 struct{ ID string }
	postJSON(t, addr, "/v1/sessions", map[string]string{"ttl": "30s"}, &s1)
	postJSON(t, addr, "/v1/sessions", map[string]string{"ttl": "30s"}, &s2)
	acquire := func(s, name, value string) {
		var r struct{ Status string }
		postJSON(t, addr, "/v1/acquire", map[string]any{"session": s, "wait": "10s",
			"locks": []any{map[string]string{"name": name, "value": value}}}, &r)
		if r.Status != "granted" {
			t.Errorf("acquire %s: %s", name, r.Status)
		}
	}

	for i, asJSON := range []bool{false, true} {
		name := "svc/watch" + strconv.Itoa(i)
		args := []string{"leader", "--watch", name}
		if asJSON {
			args = []string{"leader", "--watch", "--json", name}
		}
		w := startLockctl(t, addr, t.TempDir(), args...)
		printed := func(n int) {
			t.Helper()
			waitFor(t, 10*time.Second, "line "+strconv.Itoa(n)+" of leader --watch", func() bool {
				return strings.Count(w.stdout.String(), "\n") >= n
			})
		}
		printed(1)
		acquire(s1.ID, name, "a:1")
		printed(2)
		postJSON(t, addr, "/v1/proclaim", map[string]string{"session": s1.ID, "name": name, "value": "a:2"}, nil)
		printed(3)
		done := make(chan struct{})
		go func() { defer close(done); acquire(s2.ID, name, "b:1") }()
		waitFor(t, 10*time.Second, "the second to queue", func() bool { return lockWaiters(addr, name) == 1 })
		postJSON(t, addr, "/v1/release", map[string]string{"session": s1.ID, "name": name}, nil)
		<-done
		printed(4)
		_ = w.cmd.Process.Signal(syscall.SIGINT)
		if code := w.wait(t, 10*time.Second); code != 0 {
			t.Fatalf("leader --watch: exit %d after SIGINT; stderr: %s", code, &w.stderr)
		}
		lines := strings.Split(strings.TrimSpace(w.stdout.String()), "\n")
		if len(lines) != 4 {
			t.Fatalf("json=%v: want 4 lines, got:\n%s", asJSON, w.stdout.String())
		}
		var tokens []uint64
		for j, want := range []string{"", "a:1", "a:2", "b:1"} {
			value, token := parseLeaderLine(t, lines[j], name, asJSON)
			if value != want || (want == "") != (token == 0) {
				t.Fatalf("json=%v line %d %q: want value %q", asJSON, j, lines[j], want)
			}
			tokens = append(tokens, token)
		}
		if tokens[1] != tokens[2] || tokens[3] <= tokens[2] {
			t.Fatalf("json=%v: tokens %v: want the proclaim's equal to the first leader's, the next leader's above", asJSON, tokens)
		}
		postJSON(t, addr, "/v1/release", map[string]string{"session": s2.ID, "name": name}, nil)
	}
}

// parseLeaderLine reads back a line of leader --watch: the leader's value
// and token ("" and 0: nobody leads).
func parseLeaderLine(t *testing.T, line, name string, asJSON bool) (string, uint64) {
	t.Helper()
	if asJSON {
		var l leaderLine
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Name != name || l.Time.IsZero() {
			t.Fatalf("line %q: %v", line, err)
		}
		if l.Leader == nil {
			return "", 0
		}
		return l.Leader.Value, l.Leader.Token
	}
	// "15:04:05.000 NAME: leader "VALUE" (token N)" or "... NAME: no leader"
	_, rest, ok := strings.Cut(line, " "+name+": ")
	if !ok {
		t.Fatalf("line %q does not name %s", line, name)
	}
	if rest == "no leader" {
		return "", 0
	}
	q, tok, ok := strings.Cut(strings.TrimPrefix(rest, "leader "), " (token ")
	value, err := strconv.Unquote(q)
	token, terr := strconv.ParseUint(strings.TrimSuffix(tok, ")"), 10, 64)
	if !ok || err != nil || terr != nil {
		t.Fatalf("bad line %q", line)
	}
	return value, token
}
