package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockd/lockd/api/client"
)

// leaderLine is lockctl leader --json, and one line of --watch --json.
type leaderLine struct {
	Time   time.Time              `json:"time,omitzero"` // --watch: when it was seen
	Name   string                 `json:"name"`
	Leader *client.ElectionLeader `json:"leader"` // null: nobody leads (--watch's first line only)
}

const leaderHelp = `
Prints the leader of NAME: the value it proclaims (what lockctl elect's
--value, or a later proclaim, says), its fencing token (the term) and since
when it leads. Exits 1 when nobody leads NAME.

With --watch, prints the leader now (or "no leader"), then one line
per change: a new leader (a larger token) or a new value proclaimed under
the same token, in token order, following the election with blocking
queries across leader elections and outages of the cluster; a time without
a leader prints nothing. Stops, exiting 0, on SIGINT, SIGTERM or SIGHUP.
--json prints one JSON object per line: time, name, leader {value, token,
since} (null: nobody leads).
`

func runLeader(e *env, args []string) int {
	fs := e.flags(true)
	watch := fs.Bool("watch", false, "print the leader, then each change, until interrupted")
	stale := fs.Bool("stale", false, "read the answering node's table as it is: works without a leader, may miss the latest changes")
	e.note(fs, leaderHelp)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	switch {
	case fs.NArg() != 1:
		return e.usageErr(fs, "want exactly one NAME")
	case *watch && *stale:
		return e.usageErr(fs, "--watch follows the leader with linearizable reads: no --stale")
	}
	name := fs.Arg(0)
	if *watch {
		return e.watchLeader(name)
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		l, err := c.Election(name).Leader(ctx, readOpts(*stale)...)
		switch {
		case errors.Is(err, client.ErrElectionNoLeader):
			fmt.Fprintf(e.stderr, "lockctl leader: nobody leads %s\n", name)
			return exitFalse
		case err != nil:
			return e.fail(err)
		case e.json:
			return printJSON(e.stdout, leaderLine{Name: name, Leader: l})
		}
		w := table(e.stdout)
		fmt.Fprintf(w, "Name:\t%s\n", name)
		fmt.Fprintf(w, "Value:\t%s\n", orDash(valueText(l.Value)))
		fmt.Fprintf(w, "Token:\t%d\n", l.Token)
		if !l.Since.IsZero() {
			fmt.Fprintf(w, "Since:\t%s\n", l.Since.Local().Format(time.RFC3339Nano))
		}
		w.Flush()
		return exitOK
	})
}

// watchLeader prints name's leader now, then each change Observe
// delivers, until a signal (exit 0). The first read is bounded by
// --timeout, so that an unreachable cluster is reported; Observe then
// rides out outages.
func (e *env) watchLeader(name string) int {
	c, err := e.client()
	if err != nil {
		fmt.Fprintf(e.stderr, "lockctl leader: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	el := c.Election(name)
	rctx, cancel := context.WithTimeout(ctx, e.timeout)
	cur, err := el.Leader(rctx)
	cancel()
	switch {
	case ctx.Err() != nil:
		return exitOK
	case err != nil && !errors.Is(err, client.ErrElectionNoLeader):
		return e.fail(err)
	}
	if code := e.printLeader(name, cur); code != exitOK {
		return code
	}
	for l := range el.Observe(ctx) {
		if cur != nil && l.Token == cur.Token && l.Value == cur.Value {
			continue // Observe's first delivery: the leader printed already
		}
		cur = &l
		if code := e.printLeader(name, cur); code != exitOK {
			return code
		}
	}
	if ctx.Err() != nil {
		return exitOK
	}
	// Observe stops only on a refusal: read once more to say which.
	rctx, cancel = context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	if _, err := el.Leader(rctx); err != nil && !errors.Is(err, client.ErrElectionNoLeader) {
		return e.fail(err)
	}
	return e.fail(errors.New("the cluster stopped answering the watch"))
}

// printLeader prints one line of leader --watch; l nil: nobody leads.
func (e *env) printLeader(name string, l *client.ElectionLeader) int {
	now := time.Now()
	if e.json {
		if err := json.NewEncoder(e.stdout).Encode(leaderLine{Time: now.UTC(), Name: name, Leader: l}); err != nil {
			return exitInternal
		}
		return exitOK
	}
	what := "no leader"
	if l != nil {
		what = fmt.Sprintf("leader %q (token %d)", l.Value, l.Token)
	}
	fmt.Fprintf(e.stdout, "%s %s: %s\n", now.Local().Format("15:04:05.000"), name, what)
	return exitOK
}
