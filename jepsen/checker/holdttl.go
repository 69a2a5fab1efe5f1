package checker

import (
	"slices"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Holds granted with a hold TTL end by themselves, at the earliest their
// acquire's invoke plus the TTL (lockd's table time never runs ahead of
// real time), whatever the client saw: a grant it never heard of (an
// acquire of unknown outcome), one whose release came too late. The
// model gets, for each such grant, an operation that ends it from that
// deadline until it stops mattering — the grant's release completed, its
// session was closed or lost, or the history ended.

// kindHoldsExpired is the operation that ends a process's holds of some
// names by their hold TTL (LockInput.Kind).
const kindHoldsExpired = "holds-expired"

// ttlGrant is one grant (maybe) made with a hold TTL.
type ttlGrant struct {
	proc            int
	index           int // history index of the acquire's invoke
	names           []string
	deadline, until time.Duration
}

// ttlGrants returns the grants made with a hold TTL, acknowledged or of
// unknown outcome, with the window in which their TTL may end them.
func ttlGrants(events []history.Event, s sessionLiveness) []ttlGrant {
	var out []ttlGrant
	open := map[int][]int{} // process -> indexes in out of grants not yet settled
	settle := func(proc int, at time.Duration, match func(g ttlGrant) bool) {
		keep := open[proc][:0]
		for _, i := range open[proc] {
			if match(out[i]) {
				out[i].until = at
			} else {
				keep = append(keep, i)
			}
		}
		open[proc] = keep
	}
	invoked := map[int]history.Event{}
	for _, e := range events {
		if e.Process < 0 {
			continue
		}
		switch {
		case e.Type == history.Invoke:
			invoked[e.Process] = e
		case e.F == history.Acquire && e.Type != history.Fail && invoked[e.Process].HoldTTL > 0:
			inv := invoked[e.Process]
			g := ttlGrant{proc: e.Process, index: inv.Index, deadline: inv.Time + inv.HoldTTL, until: s.end}
			for _, l := range inv.Locks {
				g.names = append(g.names, l.Name)
			}
			for _, gr := range e.Granted {
				if !slices.Contains(g.names, gr.Name) {
					g.names = append(g.names, gr.Name)
				}
			}
			out = append(out, g)
			open[e.Process] = append(open[e.Process], len(out)-1)
		case e.F == history.Release && e.Type != history.Info:
			names := invoked[e.Process].Names
			settle(e.Process, e.Time, func(g ttlGrant) bool {
				return slices.ContainsFunc(names, func(n string) bool { return slices.Contains(g.names, n) })
			})
		case e.F == history.Lost:
			settle(e.Process, e.Time, func(ttlGrant) bool { return true })
		}
	}
	for proc, closed := range s.closedAt {
		settle(proc, closed-1, func(g ttlGrant) bool { return g.until > closed-1 })
	}
	return out
}

// addHoldExpiries adds the operation that ends each TTL grant between its
// deadline and when it stops mattering.
func (b *lockOpsBuilder) addHoldExpiries(events []history.Event) {
	for _, g := range ttlGrants(events, b.sessions) {
		if g.deadline >= g.until || len(g.names) == 0 {
			continue
		}
		part := b.partitions.of(g.names[0])
		b.pending = append(b.pending, pendingOp{
			in:  LockInput{Kind: kindHoldsExpired, Process: g.proc, Part: part, Names: g.names, Index: g.index},
			out: LockOutput{Type: history.Info}, call: g.deadline, ret: g.until, client: -1,
		})
	}
}

// releaseDeadlines maps the invoke index of each release whose names are
// all held with a hold TTL to the earliest of their deadlines.
func releaseDeadlines(events []history.Event) map[int]time.Duration {
	out := map[int]time.Duration{}
	held := map[int]map[string]time.Duration{} // process -> name -> deadline
	invoked := map[int]time.Duration{}
	for _, e := range events {
		if e.Process < 0 {
			continue
		}
		switch {
		case e.Type == history.Invoke && e.F == history.Acquire:
			invoked[e.Process] = e.Time
		case e.Type == history.OK && e.F == history.Acquire && e.HoldTTL > 0:
			if held[e.Process] == nil {
				held[e.Process] = map[string]time.Duration{}
			}
			for _, g := range e.Granted {
				held[e.Process][g.Name] = invoked[e.Process] + e.HoldTTL
			}
		case e.Type == history.Invoke && e.F == history.Release:
			first, all := time.Duration(-1), len(e.Names) > 0
			for _, n := range e.Names {
				d, ok := held[e.Process][n]
				all = all && ok
				if first < 0 || d < first {
					first = d
				}
				delete(held[e.Process], n) // released, or found gone
			}
			if all {
				out[e.Index] = first
			}
		}
	}
	return out
}
