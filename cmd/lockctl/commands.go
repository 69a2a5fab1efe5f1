package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is one of lockctl's commands.
type command struct {
	name    string   // its words: "status", "session create"
	args    string   // its flags and arguments as usage shows them
	aliases []string // other names of it: "session ls"
	run     func(e *env, args []string) int
}

// commands is lockctl's one list of commands: the usage (lockctl --help),
// each command's own usage line, the dispatch and where the flags given
// before a command go all come from it.
var commands = []command{
	{"lock", "[--read] [--wait D] [--limit N] [--ttl D] [--grace D] [--verbose] NAME [-- COMMAND [ARGS...]]", nil, runLock},
	{"elect", "[--value V] [--wait D] [--ttl D] [--grace D] [--verbose] NAME [-- COMMAND [ARGS...]]", nil, runElect},
	{"status", "[--json]", nil, runStatus},
	{"locks", "[--prefix P] [--stale] [--json]", nil, runLocks},
	{"get", "[--stale] [--json] NAME", nil, runGet},
	{"check", "[--json] NAME TOKEN", nil, runCheck},
	{"members", "[--json]", []string{"member list"}, runMembers},
	{"member remove", "[--wait D] [--json] ID", nil, runMemberRemove},
	{"member leave", "[--json] ID", nil, runMemberLeave},
	{"watch", "[--timeout D] [--json] NAME", nil, runWatch},
	{"leader", "[--watch] [--stale] [--json] NAME", nil, runLeader},
	{"session create", "[--ttl D] [--name N] [--json]", nil, runSessionCreate},
	{"session list", "[--json]", []string{"session ls"}, runSessionList},
	{"session show", "[--json] ID", nil, runSessionShow},
	{"session delete", "[--json] ID", []string{"session rm"}, runSessionDelete},
	{"release", "--session ID [--json] NAME", nil, runRelease},
	{"revoke", "[--json] NAME", nil, runRevoke},
	{"acl bootstrap", "[--json]", nil, runBootstrap},
	{"acl token create", "--name N --rule PREFIX=ACCESS [--rule ...] [--json]", nil, runTokenCreate},
	{"acl tokens", "[--json]", []string{"acl token list"}, runTokenList},
	{"acl token delete", "ID", nil, runTokenDelete},
	{"cert deny", "[--reason R] [--json] SERIAL", nil, runCertDeny},
	{"cert denied", "[--json]", nil, runCertDenied},
}

// synopsis is c's line in usage texts, after "lockctl ", its aliases
// in a column at width.
func (c *command) synopsis(width int) string {
	s := c.name + " " + c.args
	if len(c.aliases) > 0 {
		s = fmt.Sprintf("%-*s  (also: lockctl %s)", width, s, strings.Join(c.aliases, ", lockctl "))
	}
	return s
}

// names are c's name and aliases.
func (c *command) names() []string { return append([]string{c.name}, c.aliases...) }

// lookup finds the command args start with, by the most words (an alias
// counts as its command), and how many words name it. Without one, group
// is how many leading words of args begin longer names ("session" of
// "session nope"): 0 for an unknown word.
func lookup(args []string) (c *command, words, group int) {
	for i := range commands {
		for _, name := range commands[i].names() {
			w := strings.Fields(name)
			n := 0
			for n < len(w) && n < len(args) && args[n] == w[n] {
				n++
			}
			switch {
			case n == len(w) && n > words:
				c, words = &commands[i], n
			case n < len(w):
				group = max(group, n)
			}
		}
	}
	return c, words, group
}

// commandWords is how many words of args name the command, where the
// flags hoisted from before it go: "session list" and "acl token create"
// take their flags after all their words.
func commandWords(args []string) int {
	_, words, group := lookup(args)
	return max(words, group, 1)
}

// printUsage writes the usage lines of the commands with a name in
// group ("session": session create, ...; "": every command).
func printUsage(w io.Writer, group string) {
	for _, c := range commands {
		if group == "" || slices.ContainsFunc(c.names(), func(n string) bool { return strings.HasPrefix(n, group+" ") }) {
			fmt.Fprintf(w, "  lockctl %s\n", c.synopsis(34))
		}
	}
}

// runGroup answers a group of commands named without one of them
// ("lockctl session", "lockctl acl token nope"): with help, the group's
// usage; else a usage error that says what the group has.
func runGroup(e *env, group, rest []string) int {
	name := strings.Join(group, " ")
	if len(rest) > 0 && isHelp(rest[0]) {
		fmt.Fprintln(e.stdout, "Usage:")
		printUsage(e.stdout, name)
		return exitOK
	}
	var subs []string // by their names in the group: an alias only for a command outside it
	for _, c := range commands {
		for _, n := range c.names() {
			if sub, ok := strings.CutPrefix(n, name+" "); ok {
				subs = append(subs, sub)
				break
			}
		}
	}
	if len(rest) > 0 {
		fmt.Fprintf(e.stderr, "lockctl %s: unknown subcommand %q; ", name, rest[0])
	} else {
		fmt.Fprintf(e.stderr, "lockctl %s: ", name)
	}
	fmt.Fprintf(e.stderr, "want %s or %s\n\nUsage:\n", strings.Join(subs[:len(subs)-1], ", "), subs[len(subs)-1])
	printUsage(e.stderr, name)
	return exitUsage
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}
