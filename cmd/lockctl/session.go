package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
)

// sessionInfo is how session create, list and show print a session: the
// API's fields but its creation time, a hold's "expires" only when it has
// a hold_ttl.
type sessionInfo struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	TTL        client.Duration `json:"ttl"`
	OnDeadlock string          `json:"on_deadlock"`
	Ordered    bool            `json:"ordered"`
	LockDelay  client.Duration `json:"lock_delay"`
	Held       []heldLock      `json:"held"`
	Pending    []string        `json:"pending"`
	// Revoked: the latest holds an operator revoked (lockctl revoke),
	// oldest first.
	Revoked []client.Revocation `json:"revoked,omitempty"`
}

type heldLock struct {
	client.HeldLock
	Expires string `json:"expires,omitempty"`
}

// sessionOf is the sessionInfo of s.
func sessionOf(s *client.SessionInfo) sessionInfo {
	out := sessionInfo{ID: s.ID, Name: s.Name, TTL: s.TTL, OnDeadlock: s.OnDeadlock, Ordered: s.Ordered,
		LockDelay: s.LockDelay, Held: make([]heldLock, len(s.Held)), Pending: s.Pending, Revoked: s.Revoked}
	for i, h := range s.Held {
		out.Held[i].HeldLock = h
		if !h.Expires.IsZero() {
			out.Held[i].Expires = h.Expires.Format(time.RFC3339Nano) // as the API writes it
		}
	}
	return out
}

func runSessionCreate(e *env, args []string) int {
	fs := e.flags(true)
	ttl := fs.Duration("ttl", 10*time.Second, "session TTL (1s–24h); with no keepalives the session expires after it")
	name := fs.String("name", "", "a `name` for the session, shown by session list and the dashboard")
	e.note(fs, `
Prints the new session's id (--json: the whole session). lockctl sends the
session no keepalives: it expires after --ttl, releasing whatever it holds,
unless something keeps it alive (POST /v1/sessions/ID/keepalive).
`)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageErr(fs, "unexpected arguments %q", fs.Args())
	}
	if *ttl < time.Second || *ttl > 24*time.Hour {
		return e.usageErr(fs, "--ttl %v: want 1s–24h", *ttl)
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		s, err := c.CreateSession(ctx, *ttl, client.WithSessionName(*name))
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			return printJSON(e.stdout, sessionOf(s))
		}
		fmt.Fprintln(e.stdout, s.ID)
		return exitOK
	})
}

func runSessionList(e *env, args []string) int {
	fs := e.flags(true)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageErr(fs, "unexpected arguments %q", fs.Args())
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		list, err := c.Sessions(ctx)
		if err != nil {
			return e.fail(err)
		}
		ss := make([]sessionInfo, len(list))
		for i := range list {
			ss[i] = sessionOf(&list[i])
		}
		if e.json {
			return printJSON(e.stdout, ss)
		}
		w := table(e.stdout)
		fmt.Fprintln(w, "ID\tNAME\tTTL\tHELD\tPENDING")
		for _, s := range ss {
			var held []string
			for _, h := range s.Held {
				held = append(held, h.Name)
			}
			fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%d\n", s.ID, orDash(s.Name), time.Duration(s.TTL),
				orDash(strings.Join(held, ",")), len(s.Pending))
		}
		w.Flush()
		return exitOK
	})
}

// sessionArg parses the flags of a subcommand that takes one session ID;
// note is more of its --help.
func (e *env) sessionArg(args []string, note string) (id string, code int, ok bool) {
	fs := e.flags(true)
	e.note(fs, "\n"+note+"Exits 1 when there is no session ID (never created, expired or deleted).\n")
	if code, ok := e.parse(fs, args); !ok {
		return "", code, false
	}
	if fs.NArg() != 1 {
		return "", e.usageErr(fs, "want exactly one session ID"), false
	}
	return fs.Arg(0), 0, true
}

// noSession reports a session that does not exist and returns exitFalse.
func (e *env) noSession(id string) int {
	fmt.Fprintf(e.stderr, "lockctl %s: no session %s (never created, expired or deleted)\n", e.cmd.name, id)
	return exitFalse
}

func runSessionShow(e *env, args []string) int {
	id, code, ok := e.sessionArg(args, "")
	if !ok {
		return code
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		info, err := c.GetSession(ctx, id)
		if errors.Is(err, client.ErrSessionNotFound) {
			return e.noSession(id)
		}
		if err != nil {
			return e.fail(err)
		}
		s := sessionOf(info)
		if e.json {
			return printJSON(e.stdout, s)
		}
		w := table(e.stdout)
		fmt.Fprintf(w, "ID:\t%s\n", s.ID)
		fmt.Fprintf(w, "Name:\t%s\n", orDash(s.Name))
		fmt.Fprintf(w, "TTL:\t%v\n", time.Duration(s.TTL))
		fmt.Fprintf(w, "On deadlock:\t%s\n", orDash(s.OnDeadlock))
		fmt.Fprintf(w, "Ordered:\t%t\n", s.Ordered)
		fmt.Fprintf(w, "Lock delay:\t%v\n", time.Duration(s.LockDelay))
		fmt.Fprintf(w, "Pending:\t%s\n", orDash(strings.Join(s.Pending, ",")))
		for _, rv := range s.Revoked {
			fmt.Fprintf(w, "Revoked:\t%s (token %d, at index %d)\n", rv.Name, rv.Token, rv.Index)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "HELD LOCK\tMODE\tWEIGHT\tCOUNT\tTOKEN\tEXPIRES")
		for _, h := range s.Held {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\n", h.Name, h.Mode, h.Weight, h.Count, h.Token, orDash(h.Expires))
		}
		w.Flush()
		return exitOK
	})
}

func runSessionDelete(e *env, args []string) int {
	id, code, ok := e.sessionArg(args, "Ends the session: releases everything it holds and cancels its waiting\nrequests. ")
	if !ok {
		return code
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		r, err := c.DeleteSession(ctx, id)
		if errors.Is(err, client.ErrSessionNotFound) {
			return e.noSession(id)
		}
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			if r.Released == nil {
				r.Released = []wire.ReleasedLock{}
			}
			if r.Cancelled == nil {
				r.Cancelled = []string{}
			}
			return printJSON(e.stdout, r)
		}
		fmt.Fprintf(e.stdout, "deleted session %s", id)
		if len(r.Released) > 0 {
			names := make([]string, len(r.Released))
			for i, l := range r.Released {
				names[i] = l.Name
			}
			fmt.Fprintf(e.stdout, "; released %s", strings.Join(names, ", "))
		}
		if len(r.Cancelled) > 0 {
			fmt.Fprintf(e.stdout, "; cancelled requests %s", strings.Join(r.Cancelled, ", "))
		}
		fmt.Fprintln(e.stdout)
		return exitOK
	})
}

func runRelease(e *env, args []string) int {
	fs := e.flags(true)
	sess := fs.String("session", "", "`ID` of the session whose hold to release (required)")
	e.note(fs, `
Releases one hold of NAME by session ID (a reentrant hold counts down by
one). Exits 1 when the session does not exist or does not hold NAME. A
release whose outcome is unknown (the node failed mid-call) is not resent;
check with "lockctl session show ID".
`)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "want exactly one NAME")
	}
	if *sess == "" {
		return e.usageErr(fs, "--session is required")
	}
	name := fs.Arg(0)
	return e.query(func(ctx context.Context, c *client.Client) int {
		// Not idempotent (a reentrant hold would count down twice): sent
		// to another node only when nothing was sent to the first.
		err := c.Unlock(ctx, *sess, name)
		switch {
		case errors.Is(err, client.ErrSessionNotFound):
			return e.noSession(*sess)
		case errors.Is(err, client.ErrNotHeld):
			fmt.Fprintf(e.stderr, "lockctl release: session %s does not hold %s\n", *sess, name)
			return exitFalse
		case err != nil:
			code := e.fail(err)
			if code == exitUnavailable {
				fmt.Fprintf(e.stderr, "lockctl release: the release may or may not have happened; check with: lockctl session show %s\n", *sess)
			}
			return code
		}
		// The answer does not say whether a reentrant hold remains: ask.
		remaining := -1
		if si, err := c.GetSession(ctx, *sess); err == nil {
			remaining = 0
			for _, h := range si.Held {
				if h.Name == name {
					remaining = h.Count
				}
			}
		}
		if e.json {
			return printJSON(e.stdout, struct {
				Session   string `json:"session"`
				Name      string `json:"name"`
				Remaining int    `json:"remaining"` // holds of NAME the session still has; -1: unknown
			}{*sess, name, remaining})
		}
		switch {
		case remaining == 0:
			fmt.Fprintf(e.stdout, "released %s (session %s no longer holds it)\n", name, *sess)
		case remaining > 0:
			fmt.Fprintf(e.stdout, "released one hold of %s (session %s still holds it, count %d)\n", name, *sess, remaining)
		default:
			fmt.Fprintf(e.stdout, "released one hold of %s\n", name)
		}
		return exitOK
	})
}

func runMembers(e *env, args []string) int {
	fs := e.flags(true)
	e.note(fs, `
Lists the cluster's members as the node answering sees them; the leader is
marked "*". Exits 69 when that node sees no leader.
`)
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
		type member struct {
			client.Member
			Leader bool `json:"leader"`
		}
		ms := make([]member, len(st.Members))
		for i, m := range st.Members {
			ms[i] = member{m, st.Leader.ID != "" && m.ID == st.Leader.ID}
		}
		code := exitOK
		if st.Leader.ID == "" {
			code = exitUnavailable
			fmt.Fprintf(e.stderr, "lockctl members: cluster unavailable: %s sees no leader\n", st.NodeID)
		}
		if e.json {
			printJSON(e.stdout, ms)
			return code
		}
		w := table(e.stdout)
		fmt.Fprintln(w, "ID\tHTTP\tRAFT\tVOTER\tSTATUS\tLEADER")
		for _, m := range ms {
			lead := ""
			if m.Leader {
				lead = "*"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\n", m.ID, orDash(m.HTTPAddr), orDash(m.RaftAddr), m.Voter, orDash(m.Status), lead)
		}
		w.Flush()
		return code
	})
}
