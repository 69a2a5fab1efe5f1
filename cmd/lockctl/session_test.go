//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// postJSON POSTs body to path on addr and decodes a 2xx answer into out.
func postJSON(t *testing.T, addr, path string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post("http://"+addr+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// acquireHTTP takes name for session s through the HTTP API.
func acquireHTTP(t *testing.T, addr, s, name string) {
	t.Helper()
	var r struct{ Status string }
	postJSON(t, addr, "/v1/acquire", map[string]any{"session": s, "locks": []any{map[string]string{"name": name}}, "wait": "10s"}, &r)
	if r.Status != "granted" {
		t.Fatalf("acquire %s: %s", name, r.Status)
	}
}

// TestSessionCommands drives session create/list/show/delete and release.
func TestSessionCommands(t *testing.T) {
	addr := startDev(t)

	code, out, stderr := lockctl(t, addr, "session", "create", "--ttl", "30s", "--name", "nightly")
	id := strings.TrimSpace(out)
	if code != 0 || id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("create: exit %d: %q %s", code, out, stderr)
	}
	acquireHTTP(t, addr, id, "jobs/s")
	acquireHTTP(t, addr, id, "jobs/s") // reentrant: count 2

	code, out, stderr = lockctl(t, addr, "session", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("list: exit %d:\n%s%s", code, out, stderr)
	}
	if f := strings.Fields(lines[1]); f[0] != id || f[1] != "nightly" || f[2] != "30s" || f[3] != "jobs/s" {
		t.Fatalf("list row %q", lines[1])
	}
	code, out, _ = lockctl(t, addr, "session", "list", "--json")
	var list []struct{ ID, Name string }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("list --json: exit %d: %s", code, out)
	}

	code, out, stderr = lockctl(t, addr, "session", "show", id)
	if code != 0 || !strings.Contains(out, "nightly") || !strings.Contains(out, "HELD LOCK") || !strings.Contains(out, "jobs/s") {
		t.Fatalf("show: exit %d:\n%s%s", code, out, stderr)
	}
	code, out, _ = lockctl(t, addr, "session", "show", "--json", id)
	var show struct {
		Held []struct {
			Name  string
			Count int
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &show) != nil || len(show.Held) != 1 || show.Held[0].Count != 2 {
		t.Fatalf("show --json: exit %d: %s", code, out)
	}

	// release: one hold at a time.
	if code, out, stderr := lockctl(t, addr, "release", "--session", id, "jobs/s"); code != 0 || !strings.Contains(out, "still holds") {
		t.Fatalf("release 1: exit %d: %s%s", code, out, stderr)
	}
	if code, out, stderr := lockctl(t, addr, "release", "--session", id, "--json", "jobs/s"); code != 0 || !strings.Contains(out, `"remaining": 0`) {
		t.Fatalf("release 2: exit %d: %s%s", code, out, stderr)
	}
	if h := lockHolders(addr, "jobs/s"); len(h) != 0 {
		t.Fatalf("jobs/s still held by %v", h)
	}
	if code, _, stderr := lockctl(t, addr, "release", "--session", id, "jobs/s"); code != exitFalse || !strings.Contains(stderr, "does not hold") {
		t.Fatalf("release not held: exit %d: %s", code, stderr)
	}
	if code, _, _ := lockctl(t, addr, "release", "jobs/s"); code != exitUsage {
		t.Fatalf("release without --session: exit %d", code)
	}

	// delete releases what the session holds.
	acquireHTTP(t, addr, id, "jobs/d")
	if code, out, stderr := lockctl(t, addr, "session", "delete", id); code != 0 || !strings.Contains(out, "released jobs/d") {
		t.Fatalf("delete: exit %d: %s%s", code, out, stderr)
	}
	if h := lockHolders(addr, "jobs/d"); len(h) != 0 {
		t.Fatalf("jobs/d still held by %v", h)
	}
	for _, args := range [][]string{{"session", "show", id}, {"session", "delete", id}, {"release", "--session", id, "jobs/d"}} {
		if code, _, stderr := lockctl(t, addr, args...); code != exitFalse || !strings.Contains(stderr, "no session") {
			t.Fatalf("%q on a deleted session: exit %d: %s", args, code, stderr)
		}
	}
	if code, out, _ := lockctl(t, addr, "session", "list", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after delete: exit %d: %s", code, out)
	}
}

// TestSessionCreateExpires checks that a session made by session create,
// which nobody keeps alive, expires after its TTL.
func TestSessionCreateExpires(t *testing.T) {
	addr := startDev(t)
	code, out, stderr := lockctl(t, addr, "session", "create", "--ttl", "1s", "--json")
	var s struct{ ID, TTL string }
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.ID == "" || s.TTL != "1s" {
		t.Fatalf("create: exit %d: %s%s", code, out, stderr)
	}
	waitFor(t, 10*time.Second, "the session to expire", func() bool {
		code, _, _ := lockctl(t, addr, "session", "show", s.ID)
		return code == exitFalse
	})
}

func TestMembers(t *testing.T) {
	addr := startDev(t)
	code, out, stderr := lockctl(t, addr, "members")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("exit %d:\n%s%s", code, out, stderr)
	}
	if f := strings.Fields(lines[1]); len(f) != 6 || f[0] != "dev" || f[1] != addr || f[3] != "true" || f[4] != "alive" || f[5] != "*" {
		t.Fatalf("row %q", lines[1])
	}
	code, out, _ = lockctl(t, addr, "members", "--json")
	var ms []struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"http_addr"`
		Leader   bool   `json:"leader"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ms) != nil || len(ms) != 1 || !ms[0].Leader || ms[0].HTTPAddr != addr {
		t.Fatalf("--json: exit %d: %s", code, out)
	}
}
