package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockd/lockd/api/client"
)

// aliveRetry is how often member remove --wait asks again while the
// cluster answers that the member is alive.
const aliveRetry = 500 * time.Millisecond

func runMemberRemove(e *env, args []string) int {
	fs := e.flags(true)
	wait := fs.Duration("wait", 0, "while the cluster sees the member alive, ask again for up to `D` (a node stopped just now is seen dead within about 10s)")
	e.note(fs, `
Removes server ID from the raft configuration, for a node that is gone for
good. The cluster refuses (exit 65) while its gossip sees the node alive, as
it would add it back: make a healthy node leave (lockctl member leave ID),
or stop it first. The leader cannot be removed; make it leave. Needs a
management token or an operator's client certificate.
`)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "want exactly one ID")
	}
	id := fs.Arg(0)
	c, err := e.client()
	if err != nil {
		fmt.Fprintf(e.stderr, "lockctl member remove: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *wait+e.timeout)
	defer cancel()
	members, err := removeWhenDead(ctx, c, id, time.Now().Add(*wait))
	if err != nil {
		code := e.fail(err)
		if errors.Is(err, client.ErrMemberAlive) && *wait == 0 {
			fmt.Fprintln(e.stderr, "lockctl member remove: a node stopped just now is seen dead within about 10s; --wait 30s asks again until then")
		}
		return code
	}
	if e.json {
		return printJSON(e.stdout, struct {
			Removed string          `json:"removed"`
			Members []client.Member `json:"members"`
		}{id, members})
	}
	var voters []string
	for _, m := range members {
		if m.Voter {
			voters = append(voters, m.ID)
		}
	}
	fmt.Fprintf(e.stdout, "removed %s from the raft configuration; voters: %s\n", id, strings.Join(voters, ", "))
	return exitOK
}

// removeWhenDead removes id, asking again while the cluster answers that
// it is alive, until until.
func removeWhenDead(ctx context.Context, c *client.Client, id string, until time.Time) ([]client.Member, error) {
	for {
		members, err := c.RemoveMember(ctx, id)
		if !errors.Is(err, client.ErrMemberAlive) || !time.Now().Add(aliveRetry).Before(until) {
			return members, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(aliveRetry):
		}
	}
}

func runMemberLeave(e *env, args []string) int {
	fs := e.flags(true)
	e.note(fs, `
Asks node ID to leave the cluster for good: lockctl finds its HTTP address
among the members, checks that the node there is ID and sends it
POST /v1/agent/leave. The node takes itself out of the raft configuration
and gossip, then stops; lockctl returns once it has accepted (lockctl
members shows when it is gone). Do not start it again with its old data
dir. Needs a management token or an operator's client certificate.
`)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "want exactly one ID")
	}
	id := fs.Arg(0)
	return e.query(func(ctx context.Context, c *client.Client) int {
		err := c.Leave(ctx, id)
		if errors.Is(err, client.ErrUnknownMember) {
			fmt.Fprintf(e.stderr, "lockctl member leave: %v (lockctl members lists the members)\n", err)
			return exitFalse
		}
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			return printJSON(e.stdout, map[string]any{"node_id": id, "leaving": true})
		}
		fmt.Fprintf(e.stdout, "%s is leaving: it takes itself out of the raft configuration, then stops\n", id)
		return exitOK
	})
}
