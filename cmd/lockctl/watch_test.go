//go:build linux

package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
)

// TestWatch starts lockctl watch on a free name, then takes and releases
// it (twice, the second time with a waiter) over HTTP, and checks that
// watch printed each change with increasing versions. Each change waits
// for watch to print the one before: watch shows changes between two of
// its answers as one, so changes made on a clock (they were 300 ms apart)
// merged when watch was slow on a loaded machine. SIGINT ends the watch;
// --timeout is checked on its own at the end.
func TestWatch(t *testing.T) {
	addr := startDev(t)
	var s1, s2 struct{ ID string }
	postJSON(t, addr, "/v1/sessions", map[string]string{"ttl": "30s"}, &s1)
	postJSON(t, addr, "/v1/sessions", map[string]string{"ttl": "30s"}, &s2)

	for _, asJSON := range []bool{false, true} {
		args := []string{"watch", "jobs/w"}
		if asJSON {
			args = []string{"watch", "--json", "jobs/w"}
		}
		w := startLockctl(t, addr, t.TempDir(), args...)
		printed := func(n int) {
			t.Helper()
			for deadline := time.Now().Add(10 * time.Second); strings.Count(w.stdout.String(), "\n") < n; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("json=%v: watch printed no line %d within 10s:\n%s\nstderr: %s", asJSON, n, w.stdout.String(), &w.stderr)
				}
			}
		}
		printed(1) // the initial state
		acquireHTTP(t, addr, s1.ID, "jobs/w")
		printed(2)
		postJSON(t, addr, "/v1/release", map[string]string{"session": s1.ID, "name": "jobs/w"}, nil)
		printed(3)
		acquireHTTP(t, addr, s1.ID, "jobs/w")
		printed(4)
		// s2 queues behind s1 and gets the lock when s1 releases.
		body := `{"session":"` + s2.ID + `","locks":[{"name":"jobs/w"}],"wait":"10s"}`
		go func() {
			if resp, err := http.Post("http://"+addr+"/v1/acquire", "application/json", strings.NewReader(body)); err == nil {
				resp.Body.Close()
			}
		}()
		printed(5)
		postJSON(t, addr, "/v1/release", map[string]string{"session": s1.ID, "name": "jobs/w"}, nil)
		printed(6)
		postJSON(t, addr, "/v1/release", map[string]string{"session": s2.ID, "name": "jobs/w"}, nil)
		printed(7)

		_ = w.cmd.Process.Signal(syscall.SIGINT)
		if code := w.wait(t, 10*time.Second); code != 0 {
			t.Fatalf("watch exit %d after SIGINT: %s", code, &w.stderr)
		}
		lines := strings.Split(strings.TrimSpace(w.stdout.String()), "\n")
		// free, held by s1, free, held by s1, s1 + waiter s2, held by s2, free
		want := []struct {
			holder, waiter string
		}{{"", ""}, {s1.ID, ""}, {"", ""}, {s1.ID, ""}, {s1.ID, s2.ID}, {s2.ID, ""}, {"", ""}}
		if len(lines) != len(want) {
			t.Fatalf("json=%v: want %d lines, got:\n%s\nstderr: %s", asJSON, len(want), w.stdout.String(), &w.stderr)
		}
		var last uint64
		for i, line := range lines {
			var ev watchEvent
			if asJSON {
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("line %d %q: %v", i, line, err)
				}
			} else {
				ev = parseWatchLine(t, line)
			}
			holder, waiter := "", ""
			if len(ev.Holders) > 0 {
				holder = ev.Holders[0].Session
			}
			if len(ev.Waiters) > 0 {
				waiter = ev.Waiters[0].Session
			}
			if holder != want[i].holder || waiter != want[i].waiter || ev.Free != (holder == "" && waiter == "") {
				t.Errorf("json=%v line %d %q: want holder %q waiter %q", asJSON, i, line, want[i].holder, want[i].waiter)
			}
			if i > 0 && ev.Version <= last {
				t.Errorf("json=%v line %d %q: version %d not above %d", asJSON, i, line, ev.Version, last)
			}
			last = ev.Version
		}
	}

	// --timeout ends the watch with exit 0 (after at most the initial
	// state: nothing changes meanwhile).
	start := time.Now()
	code, out, stderr := lockctl(t, addr, "watch", "--timeout", "1s", "jobs/w")
	if d := time.Since(start); code != 0 || d < time.Second || strings.Count(out, "\n") > 1 {
		t.Fatalf("watch --timeout 1s: exit %d after %v, output %q; stderr: %s", code, d, out, stderr)
	}
}

// parseWatchLine reads back a text line of watch, e.g.
// "16:43:25.904 jobs/w version 13: held by 12 (write, token 13); waiting: 14 (write)".
func parseWatchLine(t *testing.T, line string) watchEvent {
	t.Helper()
	var ev watchEvent
	f := strings.Fields(line)
	if len(f) < 5 || f[1] != "jobs/w" || f[2] != "version" {
		t.Fatalf("bad line %q", line)
	}
	v := strings.TrimSuffix(f[3], ":")
	for _, c := range v {
		ev.Version = ev.Version*10 + uint64(c-'0')
	}
	rest := strings.Join(f[4:], " ")
	held, waiting, _ := strings.Cut(rest, "; waiting: ")
	if held == "free" {
		ev.Free = waiting == ""
	} else if s, ok := strings.CutPrefix(held, "held by "); ok {
		ev.Holders = append(ev.Holders, clientHolder(strings.Fields(s)[0]))
	} else {
		t.Fatalf("bad line %q", line)
	}
	if waiting != "" {
		ev.Waiters = append(ev.Waiters, clientWaiter(strings.Fields(waiting)[0]))
	}
	return ev
}

func clientHolder(s string) client.Holder { return client.Holder{Session: s} }
func clientWaiter(s string) client.Waiter { return client.Waiter{Session: s} }
