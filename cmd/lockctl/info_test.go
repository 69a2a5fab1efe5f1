//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
)

// TestQuorumLine: lockctl status says what the node judged of its quorum,
// and a lost quorum makes it exit 69.
func TestQuorumLine(t *testing.T) {
	voter := []client.Member{{ID: "n1", Voter: true}}
	for _, tc := range []struct {
		name string
		st   client.Status
		line string
		lost bool
	}{
		{"all voters", client.Status{Members: voter, Quorum: wire.Quorum{Voters: 3, Reachable: []string{"n1", "n2", "n3"}, Needed: 2}},
			"ok (3 of 3 voters)", false},
		{"one voter down", client.Status{Members: voter, Quorum: wire.Quorum{Voters: 3, Reachable: []string{"n1", "n3"}, Needed: 2}},
			"ok (2 of 3 voters reachable: n1, n3; a majority of 2 is needed)", false},
		{"lost", client.Status{Members: voter, QuorumLost: true, Quorum: wire.Quorum{Voters: 3, Reachable: []string{"n1"}, Needed: 2}},
			"lost (1 of 3 voters reachable: n1; a majority of 2 is needed)", true},
		{"in no cluster", client.Status{}, "none (this node is in no cluster yet)", false},
		{"a node of an older build", client.Status{Members: voter}, "", false},
	} {
		line, lost := quorumLine(&tc.st)
		if line != tc.line || lost != tc.lost {
			t.Errorf("%s: %q, lost %v; want %q, %v", tc.name, line, lost, tc.line, tc.lost)
		}
	}
}

// TestInfoCommands drives status, locks, get and check against a dev node
// while a lockctl lock holds jobs/info and another waits for it.
func TestInfoCommands(t *testing.T) {
	addr := startDev(t)
	dir := t.TempDir()
	holder := startLockctl(t, addr, dir, "lock", "jobs/info", "--", "sh", "-c", `echo $LOCKD_FENCING_TOKEN > token; exec sleep 30`)
	waitFor(t, 10*time.Second, "jobs/info to be held", func() bool {
		_, err := os.Stat(filepath.Join(dir, "token"))
		return err == nil
	})
	b, _ := os.ReadFile(filepath.Join(dir, "token"))
	token := strings.TrimSpace(string(b))
	sess := lockHolders(addr, "jobs/info")[0]
	waiter := startLockctl(t, addr, dir, "lock", "jobs/info", "--", "true")

	t.Run("status", func(t *testing.T) {
		code, out, stderr := lockctl(t, addr, "status")
		if code != 0 || !strings.Contains(out, "Leader:") || !strings.Contains(out, "dev") ||
			!regexp.MustCompile(`(?m)^Quorum: +ok \(1 of 1 voters\)$`).MatchString(out) {
			t.Fatalf("exit %d\n%s%s", code, out, stderr)
		}
		code, out, _ = lockctl(t, addr, "status", "--json")
		var st struct {
			State   string `json:"state"`
			Members []any  `json:"members"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.State != "leader" || len(st.Members) != 1 {
			t.Fatalf("exit %d: %s", code, out)
		}
	})

	waitFor(t, 10*time.Second, "a waiter on jobs/info", func() bool {
		var info struct{ Waiters []any }
		return getJSON(addr, "/v1/locks/jobs/info", &info) == nil && len(info.Waiters) == 1
	})

	t.Run("locks", func(t *testing.T) {
		code, out, stderr := lockctl(t, addr, "locks", "--prefix", "jobs/")
		// The holder by its id and the name lockctl lock gave its session.
		label := sess + " (lockctl " + hostname(t) + " pid "
		if code != 0 || !strings.Contains(out, "jobs/info") || !strings.Contains(out, label) ||
			!strings.Contains(out, "exec sleep 30)") {
			t.Fatalf("exit %d, want %q...: \n%s%s", code, label, out, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") {
			t.Fatalf("want a header and one row:\n%s", out)
		}
		row := lines[1][:strings.Index(lines[1], label)] + "ID" + lines[1][strings.Index(lines[1], "exec sleep 30)")+len("exec sleep 30)"):]
		if f := strings.Fields(row); f[1] != "write" || f[3] != "1" || f[4] != token {
			t.Fatalf("row %q: want mode write, 1 waiter, token %s", lines[1], token)
		}
		code, out, _ = lockctl(t, addr, "locks", "--prefix", "nothing/", "--json")
		if code != 0 || strings.TrimSpace(out) != "[]" {
			t.Fatalf("empty prefix: exit %d: %q", code, out)
		}
	})

	t.Run("get", func(t *testing.T) {
		code, out, stderr := lockctl(t, addr, "get", "jobs/info")
		if code != 0 || !strings.Contains(out, "HOLDER SESSION") || !strings.Contains(out, "WAITER SESSION") || !strings.Contains(out, sess) {
			t.Fatalf("exit %d\n%s%s", code, out, stderr)
		}
		code, out, _ = lockctl(t, addr, "get", "jobs/info", "--json") // flags after NAME too
		var l struct {
			Holders []struct{ Token uint64 }
			Waiters []any
		}
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Holders) != 1 || len(l.Waiters) != 1 ||
			strconv.FormatUint(l.Holders[0].Token, 10) != token {
			t.Fatalf("exit %d: %s", code, out)
		}
		if code, _, stderr := lockctl(t, addr, "get", "jobs/none"); code != exitFalse || !strings.Contains(stderr, "nobody") {
			t.Fatalf("unknown name: exit %d: %s", code, stderr)
		}
	})

	t.Run("check", func(t *testing.T) {
		if code, out, stderr := lockctl(t, addr, "check", "jobs/info", token); code != 0 || !strings.HasPrefix(out, "valid") {
			t.Fatalf("current token: exit %d: %s%s", code, out, stderr)
		}
		code, out, _ := lockctl(t, addr, "check", "--json", "jobs/info", "1")
		var r struct {
			Valid   bool   `json:"valid"`
			Current uint64 `json:"current"`
		}
		if code != exitFalse || json.Unmarshal([]byte(out), &r) != nil || r.Valid || strconv.FormatUint(r.Current, 10) != token {
			t.Fatalf("stale token: exit %d: %s", code, out)
		}
		if code, _, _ := lockctl(t, addr, "check", "jobs/info", "x"); code != exitUsage {
			t.Fatalf("bad token: exit %d", code)
		}
	})

	_ = holder.cmd.Process.Signal(syscall.SIGTERM)
	holder.wait(t, 10*time.Second)
	if code := waiter.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("waiter: exit %d: %s", code, &waiter.stderr)
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestUsage(t *testing.T) {
	if code := run(nil, new(strings.Builder), new(strings.Builder)); code != exitUsage {
		t.Fatalf("no args: %d", code)
	}
	var out strings.Builder
	if code := run([]string{"--help"}, &out, new(strings.Builder)); code != 0 || !strings.Contains(out.String(), "Exit codes") {
		t.Fatalf("--help: %d %q", code, out.String())
	}
	if code := run([]string{"nope"}, new(strings.Builder), new(strings.Builder)); code != exitUsage {
		t.Fatalf("unknown command: %d", code)
	}
	for _, args := range [][]string{
		{"lock", "--read", "--limit", "2", "x", "--", "true"},
		{"lock", "--ttl", "10ms", "x", "--", "true"},
		{"lock", "--wait", "-1s", "x", "--", "true"},
		{"elect", "--read", "x", "--", "true"}, // an election is exclusive
		{"elect", "--limit", "2", "x", "--", "true"},
		{"elect", "--value", "v", "--grace", "-1s", "x"},
		{"elect", "x", "--value", "v", "true"}, // a flag after NAME without "--"
		{"leader"},
		{"leader", "a", "b"},
		{"leader", "--watch", "--stale", "x"},
		{"get"},
		{"check", "x"},
		{"session"},
		{"session", "nope"},
		{"session", "create", "--ttl", "10ms"},
		{"session", "show"},
		{"session", "delete", "a", "b"},
		{"release", "x"},
		{"release", "--session", "1"},
		{"members", "x"},
		{"watch"},
		{"watch", "--timeout", "-1s", "x"},
	} {
		if code := run(args, new(strings.Builder), new(strings.Builder)); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
