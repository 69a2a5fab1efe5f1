package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDocsShowEveryCommand: docs/cli.md shows each command's usage line
// as --help does (by its name or an alias), and its table of commands
// links every command's section.
func TestDocsShowEveryCommand(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var lines []string
	for _, l := range strings.Split(doc, "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	for _, c := range commands {
		shown := slices.ContainsFunc(c.names(), func(name string) bool {
			return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "lockctl "+name+" "+c.args) })
		})
		if !shown {
			t.Errorf("docs/cli.md has no line %q (or one of its aliases %q)", "lockctl "+c.name+" "+c.args, c.aliases)
		}
		if first, _, _ := strings.Cut(c.name, " "); !strings.Contains(doc, "](#lockctl-"+first+")") {
			t.Errorf("docs/cli.md's table of commands does not link #lockctl-%s", first)
		}
	}
}

// TestCommandNames: every name and alias leads to its own command,
// including after flags hoisted from before it; a group's word alone is a
// usage error, and its help lists the group.
func TestCommandNames(t *testing.T) {
	for i := range commands {
		for _, name := range commands[i].names() {
			words := strings.Fields(name)
			c, n, _ := lookup(append(words, "ARG"))
			if c != &commands[i] || n != len(words) {
				t.Errorf("%q finds %v after %d words", name, c, n)
			}
			if got := commandWords(append(words, "--json")); got != len(words) {
				t.Errorf("%q: hoisted flags go after %d words", name, got)
			}
		}
	}
	for _, group := range []string{"session", "member", "acl", "acl token", "cert"} {
		var out, errOut strings.Builder
		if code := run(strings.Fields(group), &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "lockctl "+group+": want ") {
			t.Errorf("%q: exit %d, stderr %q", group, code, &errOut)
		}
		out.Reset()
		if code := run(append(strings.Fields(group), "--help"), &out, &errOut); code != exitOK || !strings.Contains(out.String(), "lockctl "+group+" ") {
			t.Errorf("%q --help: exit %d, stdout %q", group, code, &out)
		}
	}
}
