//go:build linux

package main

import (
	"strings"
	"testing"
)

// leaks reports the first 6-character piece of secret found in out, "" for
// none.
func leaks(out, secret string) string {
	for i := 0; i+6 <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+6]) {
			return secret[i : i+6]
		}
	}
	return ""
}

// TestTokenNeverPrinted: with LOCKD_TOKEN (or --token) set, no usage
// text, error or --json output of lockctl shows any part of the secret —
// whether the secret is valid or not.
func TestTokenNeverPrinted(t *testing.T) {
	addr, _ := startDevProc(t, "", "--acl")
	code, out, stderr := lockctl(t, addr, "acl", "bootstrap")
	if code != exitOK {
		t.Fatalf("bootstrap: %d %s", code, stderr)
	}
	root := secretOf(t, out)
	const wrong = "Wr0ngSecretThatNoNodeKnowsAtAll-1234567"
	for _, secret := range []string{root, wrong} {
		t.Setenv("LOCKD_TOKEN", secret)
		for _, args := range [][]string{
			{"--help"}, {"locks", "--help"}, {"lock", "--help"}, {"get", "-h"},
			{"acl", "token", "create", "--help"}, {"session", "list", "--help"},
			{"locks", "--no-such-flag"}, {"get", "--bogus", "x"}, {"watch", "--timeout", "x", "a"},
			{"locks", "--json"}, {"locks"}, {"status", "--json"}, {"session", "list", "--json"},
			{"get", "--json", "jobs/x"}, {"acl", "tokens", "--json"},
			{"locks", "--token", secret, "--json"}, {"--token", secret, "status"},
			{"lock", "--wait", "0", "jobs/x", "--", "true"},
			{"member", "remove", "--help"}, {"member", "leave", "--json", "n9"},
		} {
			code, stdout, stderr := lockctl(t, addr, args...)
			if p := leaks(stdout+stderr, secret); p != "" {
				t.Errorf("%q (exit %d) prints %q of the secret:\n%s%s", args, code, p, stdout, stderr)
			}
		}
	}
}
