package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/lockd/lockd/api/client"
)

// query runs f with a client of --addr and a bounded context.
func (e *env) query(f func(ctx context.Context, c *client.Client) int) int {
	c, err := e.client()
	if err != nil {
		fmt.Fprintf(e.stderr, "lockctl %s: %v\n", e.cmd.name, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	return f(ctx, c)
}

// readOpts is --stale as the client's read options.
func readOpts(stale bool) []client.ReadOption {
	if stale {
		return []client.ReadOption{client.Stale()}
	}
	return nil
}

// printJSON writes v indented to w.
func printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return exitInternal
	}
	return exitOK
}

// table returns a tabwriter for aligned columns on w.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// valueText shows a hold's value in a table ("" for none, which orDash
// shows as "-"): as it is, or quoted when it could be mistaken for
// something else ("-", a character that is not printable or would break
// the columns, such as a tab or a newline).
func valueText(v string) string {
	if v == "-" || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(v)
	}
	return v
}

// orDash shows an empty field as "-" so that columns stay aligned.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runStatus(e *env, args []string) int {
	fs := e.flags(true)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageErr(fs, "unexpected arguments %q", fs.Args())
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		st, err := c.Status(ctx)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			return printJSON(e.stdout, st)
		}
		w := table(e.stdout)
		fmt.Fprintf(w, "Node:\t%s (%s)\n", st.NodeID, st.State)
		leader := "none"
		if st.Leader.ID != "" {
			leader = fmt.Sprintf("%s (%s)", st.Leader.ID, st.Leader.HTTPAddr)
		}
		fmt.Fprintf(w, "Leader:\t%s\n", leader)
		quorum, lost := quorumLine(st)
		if quorum != "" {
			fmt.Fprintf(w, "Quorum:\t%s\n", quorum)
		}
		fmt.Fprintf(w, "Term:\t%d\n", st.Term)
		fmt.Fprintf(w, "Commit index:\t%d\n", st.CommitIndex)
		fmt.Fprintf(w, "Applied index:\t%d\n", st.AppliedIndex)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "ID\tHTTP\tRAFT\tVOTER\tSTATUS\tLEADER")
		for _, m := range st.Members {
			lead := ""
			if m.ID == st.Leader.ID {
				lead = "*"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\n", m.ID, orDash(m.HTTPAddr), orDash(m.RaftAddr), m.Voter, orDash(m.Status), lead)
		}
		w.Flush()
		if st.Leader.ID == "" || lost {
			// Answered, but the cluster cannot serve locks right now.
			return exitUnavailable
		}
		return exitOK
	})
}

// quorumLine says whether the answering node reaches a majority of the
// voters, as the node judged it (its quorum_lost and quorum fields), and
// reports whether the quorum is lost. It is "" for a node of an older
// build, which reports voters but no quorum.
func quorumLine(st *client.Status) (string, bool) {
	q := st.Quorum
	reachable := strings.Join(q.Reachable, ", ")
	switch {
	case q.Voters == 0 && slices.ContainsFunc(st.Members, func(m client.Member) bool { return m.Voter }):
		return "", st.QuorumLost
	case q.Voters == 0:
		return "none (this node is in no cluster yet)", st.QuorumLost
	case st.QuorumLost:
		return fmt.Sprintf("lost (%d of %d voters reachable: %s; a majority of %d is needed)",
			len(q.Reachable), q.Voters, reachable, q.Needed), true
	case len(q.Reachable) == q.Voters:
		return fmt.Sprintf("ok (%d of %d voters)", q.Voters, q.Voters), false
	default:
		return fmt.Sprintf("ok (%d of %d voters reachable: %s; a majority of %d is needed)",
			len(q.Reachable), q.Voters, reachable, q.Needed), false
	}
}

func runLocks(e *env, args []string) int {
	fs := e.flags(true)
	prefix := fs.String("prefix", "", "only names starting with `P`")
	stale := fs.Bool("stale", false, "read the answering node's table as it is: works without a leader (during an outage), may miss the latest changes")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageErr(fs, "unexpected arguments %q", fs.Args())
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		locks, err := c.Locks(ctx, *prefix, readOpts(*stale)...)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			if locks == nil {
				locks = []client.LockInfo{}
			}
			return printJSON(e.stdout, locks)
		}
		names := sessionNames(ctx, c, *stale)
		w := table(e.stdout)
		fmt.Fprintln(w, "NAME\tMODE\tHOLDERS\tWAITERS\tTOKEN\tLIMIT\tVERSION\tVALUE")
		for _, l := range locks {
			var mode client.Mode
			var token uint64
			var holders, values []string
			for _, h := range l.Holders {
				mode = h.Mode
				token = max(token, h.Token)
				holders = append(holders, names.label(h.Session))
				if h.Value != "" {
					values = append(values, valueText(h.Value))
				}
			}
			tok := "-"
			if token > 0 {
				tok = strconv.FormatUint(token, 10)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", l.Name, orDash(string(mode)),
				orDash(strings.Join(holders, ",")), len(l.Waiters), tok, l.Limit, l.Version, orDash(strings.Join(values, ",")))
		}
		w.Flush()
		if e.token.Secret() != "" {
			fmt.Fprintln(e.stderr, "note: only the names this token may read are listed, and only its own sessions "+
				"are named (a management token: all of them)")
		}
		return exitOK
	})
}

func runGet(e *env, args []string) int {
	fs := e.flags(true)
	stale := fs.Bool("stale", false, "read the answering node's table as it is: works without a leader, may miss the latest changes")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "want exactly one NAME")
	}
	name := fs.Arg(0)
	return e.query(func(ctx context.Context, c *client.Client) int {
		l, err := c.GetLock(ctx, name, readOpts(*stale)...)
		if errors.Is(err, client.ErrLockNotFound) {
			fmt.Fprintf(e.stderr, "lockctl get: nobody holds or waits for %s\n", name)
			return exitFalse
		}
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			return printJSON(e.stdout, l)
		}
		w := table(e.stdout)
		fmt.Fprintf(w, "Name:\t%s\n", l.Name)
		fmt.Fprintf(w, "Version:\t%d\n", l.Version)
		fmt.Fprintf(w, "Limit:\t%d\n", l.Limit)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "HOLDER SESSION\tMODE\tWEIGHT\tCOUNT\tTOKEN\tVALUE")
		names := sessionNames(ctx, c, *stale)
		for _, h := range l.Holders {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\n", names.label(h.Session), h.Mode, h.Weight, h.Count, h.Token, orDash(valueText(h.Value)))
		}
		if len(l.Waiters) > 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "WAITER SESSION\tMODE\tWEIGHT\tREQUEST")
			for _, q := range l.Waiters {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", names.label(q.Session), q.Mode, q.Weight, q.RequestID)
			}
		}
		w.Flush()
		return exitOK
	})
}

// sessionNamer names sessions by id: the names the session creators gave
// (lockctl lock names its sessions after the command).
type sessionNamer map[string]string

// sessionNames are the names of the sessions the caller may see (with a
// token: its own; a management token: all); none when they cannot be
// read, which leaves the listing as it is.
func sessionNames(ctx context.Context, c *client.Client, stale bool) sessionNamer {
	ss, err := c.Sessions(ctx, readOpts(stale)...)
	if err != nil {
		return nil
	}
	names := sessionNamer{}
	for _, s := range ss {
		names[s.ID] = s.Name
	}
	return names
}

// sessionText names a session in lockctl's sentences: "session ID", or
// "another token's session" for one whose id lockd leaves out (with
// ACLs, it names only the caller's own sessions).
func sessionText(id string) string {
	if id == "" {
		return anotherTokens
	}
	return "session " + id
}

// anotherTokens stands for a session whose id lockd leaves out.
const anotherTokens = "another token's session"

// label is id with its session's name, "ID (name)", or the id alone;
// a session the token may not see (the server leaves its id out) is
// "(another token's)".
func (n sessionNamer) label(id string) string {
	if id == "" {
		return "(another token's)"
	}
	if name := n[id]; name != "" {
		return fmt.Sprintf("%s (%s)", id, name)
	}
	return id
}

func runCheck(e *env, args []string) int {
	fs := e.flags(true)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		return e.usageErr(fs, "want NAME and TOKEN")
	}
	name := fs.Arg(0)
	token, err := strconv.ParseUint(fs.Arg(1), 10, 64)
	if err != nil {
		return e.usageErr(fs, "TOKEN %q is not a number", fs.Arg(1))
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		valid, current, err := c.Check(ctx, name, token)
		if err != nil {
			return e.fail(err)
		}
		code := exitOK
		if !valid {
			code = exitFalse
		}
		if e.json {
			printJSON(e.stdout, struct {
				Name    string `json:"name"`
				Token   uint64 `json:"token"`
				Valid   bool   `json:"valid"`
				Current uint64 `json:"current"`
			}{name, token, valid, current})
			return code
		}
		switch {
		case valid:
			fmt.Fprintf(e.stdout, "valid: %d is a current token of %s\n", token, name)
		case current == 0:
			fmt.Fprintf(e.stdout, "not valid: %s is not held\n", name)
		default:
			fmt.Fprintf(e.stdout, "not valid: the current token of %s is %d\n", name, current)
		}
		return code
	})
}
