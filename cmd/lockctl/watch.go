package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockd/lockd/api/client"
)

// watchPoll is the server-side wait of one blocking query of watch.
const watchPoll = 30 * time.Second

// watchEvent is one line of lockctl watch --json.
type watchEvent struct {
	Time    time.Time       `json:"time"`
	Name    string          `json:"name"`
	Version uint64          `json:"version"`
	Free    bool            `json:"free"` // nobody holds, waits for or delays it
	Limit   int             `json:"limit"`
	Holders []client.Holder `json:"holders"`
	Waiters []client.Waiter `json:"waiters"`
}

func runWatch(e *env, args []string) int {
	fs := e.flags(true)
	timeout := fs.Duration("timeout", 0, "stop after this `duration` (0: until interrupted)")
	e.note(fs, `
Prints NAME's state, then one line per change (holders, waiters, version),
following the version with blocking queries; changes that happen between two
answers show as one. --json prints one JSON object per line. Stops, exiting
0, on SIGINT/SIGTERM or after --timeout. An unreachable cluster is waited out
for about 10s, then watch exits 69.
`)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "want exactly one NAME")
	}
	if *timeout < 0 {
		return e.usageErr(fs, "negative --timeout")
	}
	name := fs.Arg(0)
	c, err := e.client()
	if err != nil {
		fmt.Fprintf(e.stderr, "lockctl watch: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	return e.watch(ctx, c, name)
}

// watch prints name's state, then each change, until ctx ends (exit 0).
// It follows the version with blocking queries, so changes that happen
// between two answers are seen as one. An unreachable cluster is waited
// out for up to --timeout.
func (e *env) watch(ctx context.Context, c *client.Client, name string) int {
	var (
		index        uint64
		first        = true
		failingSince time.Time
	)
	enc := json.NewEncoder(e.stdout)
	for {
		var wait time.Duration // the first read answers at once
		if !first {
			wait = watchPoll
			if dl, ok := ctx.Deadline(); ok {
				wait = min(wait, max(time.Until(dl).Round(time.Millisecond), time.Millisecond))
			}
		}
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, wait+e.timeout)
		info, v, err := c.WatchLock(actx, name, index, wait)
		cancel()
		if ctx.Err() != nil {
			return exitOK
		}
		if err != nil {
			if exitCode(err) != exitUnavailable {
				return e.fail(err)
			}
			if failingSince.IsZero() {
				failingSince = sent // the client retried within the call already
			} else if time.Since(failingSince) > e.timeout {
				return e.fail(err)
			}
			select {
			case <-ctx.Done():
				return exitOK
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		failingSince = time.Time{}
		free := info == nil
		if free {
			info = &client.LockInfo{Name: name}
		}
		if !first && v == index {
			continue // the wait ran out with nothing new
		}
		first, index = false, v
		ev := watchEvent{Time: time.Now().UTC(), Name: name, Version: v, Free: free,
			Limit: info.Limit, Holders: info.Holders, Waiters: info.Waiters}
		if ev.Holders == nil {
			ev.Holders = []client.Holder{}
		}
		if ev.Waiters == nil {
			ev.Waiters = []client.Waiter{}
		}
		if e.json {
			if err := enc.Encode(ev); err != nil {
				return exitInternal
			}
			continue
		}
		fmt.Fprintln(e.stdout, describe(ev))
	}
}

// describe is one text line of watch.
func describe(ev watchEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s version %d: ", ev.Time.Local().Format("15:04:05.000"), ev.Name, ev.Version)
	if len(ev.Holders) == 0 {
		b.WriteString("free")
	} else {
		hs := make([]string, len(ev.Holders))
		for i, h := range ev.Holders {
			hs[i] = fmt.Sprintf("%s (%s)", cmp.Or(h.Session, anotherTokens), holdText(h))
		}
		b.WriteString("held by " + strings.Join(hs, ", "))
	}
	if len(ev.Waiters) > 0 {
		ws := make([]string, len(ev.Waiters))
		for i, w := range ev.Waiters {
			ws[i] = fmt.Sprintf("%s (%s%s)", cmp.Or(w.Session, anotherTokens), w.Mode, weight(w.Weight))
		}
		b.WriteString("; waiting: " + strings.Join(ws, ", "))
	}
	if ev.Limit > 1 {
		fmt.Fprintf(&b, "; limit %d", ev.Limit)
	}
	return b.String()
}

// holdText describes a hold, for lockctl's sentences: mode, weight above
// 1, token, and value when it has one ("write x2, token 17, value
// \"10.0.0.7:8080\"").
func holdText(h client.Holder) string {
	s := fmt.Sprintf("%s%s, token %d", h.Mode, weight(h.Weight), h.Token)
	if h.Value != "" {
		s += ", value " + strconv.Quote(h.Value)
	}
	return s
}

// weight shows a semaphore weight above 1 as " x2".
func weight(w int) string {
	if w > 1 {
		return fmt.Sprintf(" x%d", w)
	}
	return ""
}
