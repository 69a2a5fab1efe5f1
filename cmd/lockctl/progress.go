package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/lockd/lockd/api/client"
)

// progressEvery is how often a waiting lockctl lock says where it stands.
const progressEvery = 3 * time.Second

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress prints, until ctx ends, how long the lock has been waited for,
// the session's place in the queue and who holds the name. It reads the
// answering node's table (?stale): it costs the cluster nothing and works
// during an outage.
func (e *env) progress(ctx context.Context, c *client.Client, s *client.Session, name string) {
	start := time.Now()
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		l, err := c.GetLock(rctx, name, client.Stale())
		cancel()
		if ctx.Err() != nil {
			return
		}
		fmt.Fprintf(e.stderr, "lockctl %s: waiting %v for %s: %s\n", e.cmd.name, time.Since(start).Round(time.Second), name, queueText(l, err, s.ID()))
	}
}

// queueText describes a lock's queue as seen from session me.
func queueText(l *client.LockInfo, err error, me string) string {
	if err != nil {
		return "(queue unknown: " + reason(err) + ")"
	}
	ahead := -1
	for i, w := range l.Waiters {
		if w.Session == me {
			ahead = i
			break
		}
	}
	var holders []string
	for _, h := range l.Holders {
		holders = append(holders, fmt.Sprintf("%s (%s)", sessionText(h.Session), holdText(h)))
	}
	place := "not queued yet"
	if ahead >= 0 {
		place = fmt.Sprintf("%d ahead in the queue", ahead)
	}
	if len(holders) == 0 {
		return place + "; nobody holds it"
	}
	return place + "; held by " + strings.Join(holders, ", ")
}
