package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
)

func TestHoistGlobals(t *testing.T) {
	for _, c := range []struct {
		in, want []string
		bad      bool
	}{
		{in: []string{"locks"}, want: []string{"locks"}},
		{in: []string{"--addr", "A", "locks", "--json"}, want: []string{"locks", "--addr", "A", "--json"}},
		{in: []string{"--addr=A", "-json", "--timeout", "2s", "get", "x"}, want: []string{"get", "--addr=A", "-json", "--timeout", "2s", "x"}},
		{in: []string{"--token", "s", "lock", "n", "--", "true"}, want: []string{"lock", "--token", "s", "n", "--", "true"}},
		{in: []string{"--token", "s", "session", "list"}, want: []string{"session", "list", "--token", "s"}},
		{in: []string{"--token", "s", "acl", "tokens"}, want: []string{"acl", "tokens", "--token", "s"}},
		{in: []string{"--token", "s", "acl", "token", "delete", "ID"}, want: []string{"acl", "token", "delete", "--token", "s", "ID"}},
		{in: []string{"--token", "s", "member", "remove", "n3"}, want: []string{"member", "remove", "--token", "s", "n3"}},
		{in: []string{"--json", "session"}, want: []string{"session", "--json"}},
		{in: []string{"--json", "acl", "token", "--x"}, want: []string{"acl", "token", "--json", "--x"}},
		{in: []string{"--help"}, want: []string{"--help"}},
		{in: []string{}, want: []string{}},
		{in: []string{"--wait", "0", "lock"}, bad: true}, // not a global flag
		{in: []string{"--addr"}, bad: true},
		{in: []string{"--json"}, bad: true},
	} {
		got, err := hoistGlobals(c.in)
		if (err != nil) != c.bad || (!c.bad && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("hoistGlobals(%q) = %q, %v", c.in, got, err)
		}
	}
}

// TestFailsFastWithoutANode: nothing listening at --addr: every command
// fails with exit 69, naming the address and "connection refused", well
// within its --timeout (10s by default).
func TestFailsFastWithoutANode(t *testing.T) {
	addr := lockdtest.RefusingAddr(t)
	for name, args := range map[string][]string{
		"lock":         {"lock", "--addr", addr, "--wait", "0", "jobs/a", "--", "true"},
		"locks":        {"--addr", addr, "locks"},
		"locks-stale":  {"--addr", addr, "locks", "--stale"},
		"session-list": {"--addr", addr, "session", "list"},
	} {
		// Each command gives up after the client's retries: side by side.
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			code, _, stderr := lockctl(t, "", args...)
			if code != exitUnavailable || !strings.Contains(stderr, "connection refused") || !strings.Contains(stderr, addr) {
				t.Errorf("%q: exit %d, stderr %q; want %d naming %s and connection refused", args, code, stderr, exitUnavailable, addr)
			}
			t.Logf("%q failed after %v", args, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestLockSaysWhereItWaits: lockctl lock --verbose, waiting, prints its
// place in the queue and who holds the name.
func TestLockSaysWhereItWaits(t *testing.T) {
	addr := startDev(t)
	holder := startLockctl(t, addr, t.TempDir(), "lock", "jobs/busy", "--", "sleep", "30")
	waitFor(t, 10*time.Second, "the holder", func() bool {
		_, out, _ := lockctl(t, addr, "get", "jobs/busy")
		return strings.Contains(out, "write")
	})
	code, _, stderr := lockctl(t, addr, "lock", "--verbose", "--wait", "4s", "jobs/busy", "--", "true")
	if code != exitNotAcquired || !strings.Contains(stderr, "waiting") || !strings.Contains(stderr, "0 ahead in the queue; held by session") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	_ = holder
}

// TestFlagsAfterArguments: every subcommand but lock takes its flags
// before, between and after its arguments; after "--" all are arguments.
func TestFlagsAfterArguments(t *testing.T) {
	for _, c := range []struct {
		in   []string
		json bool
		args []string
		code int // when the parse fails
	}{
		{in: []string{"NAME", "--json"}, json: true, args: []string{"NAME"}},
		{in: []string{"--json", "NAME"}, json: true, args: []string{"NAME"}},
		{in: []string{"a", "--json", "b"}, json: true, args: []string{"a", "b"}},
		{in: []string{"a", "b"}, args: []string{"a", "b"}},
		{in: []string{"a", "--", "--json"}, args: []string{"a", "--", "--json"}},
		{in: []string{"--", "-4Yyb"}, args: []string{"-4Yyb"}},
		{in: []string{"--json", "--", "-4Yyb"}, json: true, args: []string{"-4Yyb"}},
		{in: []string{"-4Yyb"}, code: exitUsage},
		{in: []string{"a", "--nope"}, code: exitUsage},
		{in: []string{"a", "--help"}, code: exitOK},
	} {
		get, _, _ := lookup([]string{"get"})
		e := &env{cmd: get, stdout: new(strings.Builder), stderr: new(strings.Builder)}
		fs := e.flags(true)
		code, ok := e.parse(fs, c.in)
		switch {
		case !ok && (c.args != nil || code != c.code):
			t.Errorf("%q: parse failed with %d, want %d", c.in, code, c.code)
		case ok && (c.args == nil || e.json != c.json || !reflect.DeepEqual(fs.Args(), c.args)):
			t.Errorf("%q: --json %v, args %q; want %v, %q", c.in, e.json, fs.Args(), c.json, c.args)
		}
	}
}
