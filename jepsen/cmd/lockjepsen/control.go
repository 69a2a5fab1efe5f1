package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/history"
	"github.com/lockd/lockd/jepsen/nemesis"
	"github.com/lockd/lockd/jepsen/report"
)

// A negative control proves something only on a run where its condition
// happened: two holders of one lock at once for no-consensus, a step of
// the leader's clock that ended a live hold for wall-clock, a lone node
// granting beside the cluster for lone-replacement, an accepted attempt
// of the intruder for intruder-admin, a stale use reaching the resource
// for unfenced, a power loss of a majority shortly after a grant was
// acknowledged for no-fsync, a holder that kept its grant past the
// latest end of its hold TTL and then looked at it for hold-past-ttl, a
// proclaim acknowledged for another hold than its own for stale-proclaim.
// judgeControl reads that from the history, independently of the
// checkers: a run whose condition did not happen is "not exercised"
// (exit 3, run it again); one whose condition happened and that no
// checker flagged is a miss of the checkers (exit 1).

// exitNotExercised is lockjepsen's exit status for a negative control
// whose condition did not happen in its run.
const exitNotExercised = 3

// judgeControl says whether negative's condition happened in events.
// Controls whose condition this build does not read from the history
// (lying-disk, stale-snapshot, ungated-upgrade) are taken as exercised.
func judgeControl(negative string, events []history.Event) *report.Control {
	c := &report.Control{Name: negative}
	for _, e := range events {
		if e.Process == history.Nemesis && e.F == nemesis.Missed {
			c.Missed = append(c.Missed, e.Error)
		}
	}
	switch negative {
	case negNoConsensus:
		c.Evidence = overlapping(holds(events), nil)
	case negWallClock:
		c.Evidence = steppedOverlap(events)
	case negLoneReplacement:
		for _, e := range events {
			if e.Process == history.Nemesis && e.F == nemesis.Exercised {
				c.Evidence = e.Targets
				break
			}
		}
	case negIntruderAdmin:
		c.Evidence = acceptedIntrusion(events)
	case negUnfenced:
		c.Evidence = staleUse(events)
	case negNoFsync:
		c.Evidence = powerLossAfterGrant(events)
	case negHoldPastTTL:
		c.Evidence = overstay(events)
	case negStaleProclaim:
		c.Evidence = foreignProclaim(events)
	default:
		c.Evidence = []string{"condition not read from the history for this control"}
	}
	c.Exercised = len(c.Evidence) > 0
	return c
}

// hold is one client's hold of one lock as the client saw it: from its
// grant (the acquire's ok) until the client stopped relying on it (its
// release's invoke, its session's loss or close, or its hold TTL after
// the acquire's invoke, whichever came first).
type hold struct {
	name    string
	token   uint64
	process int
	granted time.Duration
	end     time.Duration
	shared  bool // a read hold, or a permit of a semaphore
	used    bool // a resource operation was invoked under it
}

// holds lists the holds of events, in the order of their grants, as the
// safety checker counts them: used at the resource, by a process whose
// session was not lost (a lost session's holds ended on the server at
// some time the client cannot know).
func holds(events []history.Event) []hold {
	lost := checker.LostProcesses(events)
	invoked := map[int]history.Event{} // the pending invoke of each process
	open := map[int][]int{}            // process -> indexes into out of its holds not yet ended
	var out []hold
	end := func(p int, at time.Duration, names []string) {
		var keep []int
		for _, i := range open[p] {
			if names == nil || slices.Contains(names, out[i].name) {
				out[i].end = min(out[i].end, at)
			} else {
				keep = append(keep, i)
			}
		}
		open[p] = keep
	}
	last := time.Duration(0)
	for _, e := range events {
		last = max(last, e.Time)
	}
	for _, e := range events {
		if e.Process < 0 || lost[e.Process] {
			continue
		}
		switch {
		case e.Type == history.Invoke && e.F == history.Release:
			end(e.Process, e.Time, e.Names)
		case e.Type == history.Invoke && e.F == history.Close:
			end(e.Process, e.Time, nil)
		case e.Type == history.Invoke && (e.F == history.ResWrite || e.F == history.ResRead):
			for _, i := range open[e.Process] {
				out[i].used = out[i].used || slices.ContainsFunc(e.Granted, func(g history.Granted) bool { return g.Name == out[i].name })
			}
		case e.Type == history.Invoke:
			invoked[e.Process] = e
		case e.Type == history.OK && e.F == history.Acquire:
			inv := invoked[e.Process]
			deadline := last
			if inv.HoldTTL > 0 {
				deadline = inv.Time + inv.HoldTTL
			}
			for _, g := range e.Granted {
				out = append(out, hold{name: g.Name, token: g.Token, process: e.Process, granted: e.Time, end: deadline,
					shared: g.Mode == "read" || limitOf(inv.Locks, g.Name) > 1})
				open[e.Process] = append(open[e.Process], len(out)-1)
			}
		}
	}
	return slices.DeleteFunc(out, func(h hold) bool { return !h.used })
}

func limitOf(locks []history.Lock, name string) int {
	for _, l := range locks {
		if l.Name == name {
			return l.Limit
		}
	}
	return 0
}

// overlapping finds two exclusive holds of one lock by different
// processes where the later one was granted while the earlier one was
// still relied on; with only set, the earlier one must be it.
func overlapping(hs []hold, only *hold) []string {
	for i, a := range hs {
		if a.shared || only != nil && (a.name != only.name || a.token != only.token) {
			continue
		}
		for _, b := range hs[i+1:] {
			if b.name == a.name && !b.shared && b.process != a.process && b.granted < a.end {
				return []string{a.name, fmt.Sprintf("token %d held by process %d from %v until %v", a.token, a.process,
					a.granted.Round(time.Millisecond), a.end.Round(time.Millisecond)),
					fmt.Sprintf("token %d granted to process %d at %v", b.token, b.process, b.granted.Round(time.Millisecond))}
			}
		}
	}
	return nil
}

// steppedOverlap: a hold that an aimed step of the leader's clock was
// aimed at (the nemesis's Exercised evidence: lock, token, leader) and
// another holder granted while it was still relied on.
func steppedOverlap(events []history.Event) []string {
	hs := holds(events)
	for _, e := range events {
		if e.Process != history.Nemesis || e.F != nemesis.Exercised || len(e.Targets) < 3 {
			continue
		}
		token, err := strconv.ParseUint(e.Targets[1], 10, 64)
		if err != nil {
			continue
		}
		target := hold{name: e.Targets[0], token: token}
		if ev := overlapping(hs, &target); ev != nil {
			return append(ev, "the clock of "+e.Targets[2]+", the leader, was stepped past the hold TTL")
		}
	}
	return nil
}

// acceptedIntrusion: an attempt of the intruder through another
// client's session that the cluster let through.
func acceptedIntrusion(events []history.Event) []string {
	for _, e := range events {
		if e.Process == history.Intruder && e.F == history.Intrude && e.Type == history.OK {
			return append([]string{"accepted intrusion through session " + e.Session}, e.Names...)
		}
	}
	return nil
}

// staleUse: a write to the resource accepted under a lock's token after
// one under a larger token of the same lock (a fenced resource refuses
// it).
func staleUse(events []history.Event) []string {
	highest := map[string]uint64{}
	for _, e := range events {
		if e.Type != history.OK || e.F != history.ResWrite {
			continue
		}
		for _, g := range e.Granted {
			if g.Token < highest[g.Name] {
				return []string{g.Name, fmt.Sprintf("token %d used after token %d", g.Token, highest[g.Name])}
			}
			highest[g.Name] = max(highest[g.Name], g.Token)
		}
	}
	return nil
}

// unsyncedWindow is how recent an acknowledged grant must be for a power
// loss to take it back from a node that fsyncs now and then (--unsafe
// no-fsync fsyncs at every 64th log write, a second or less under load).
const unsyncedWindow = 2 * time.Second

// powerLossAfterGrant: a power-loss-majority the nemesis applied
// (without an error) that began within unsyncedWindow of an acknowledged
// grant. It began at its start's Began: the start is recorded only once
// the majority is back and leads.
func powerLossAfterGrant(events []history.Event) []string {
	var grants []time.Duration // acknowledged, in time order
	for _, e := range events {
		switch {
		case e.Type == history.OK && e.F == history.Acquire && len(e.Granted) > 0:
			grants = append(grants, e.Time)
		case e.Process == history.Nemesis && e.F == history.Start && e.Fault == nemesis.FaultPowerLossMajority && e.Error == "":
			// The last grant acknowledged before the power went off (not
			// one after the majority came back, before the start was
			// recorded).
			i, _ := slices.BinarySearch(grants, e.Began()+1)
			if i > 0 && e.Began()-grants[i-1] <= unsyncedWindow {
				return []string{fmt.Sprintf("%s of %v from %v", e.Fault, e.Targets, e.Began().Round(time.Millisecond)),
					fmt.Sprintf("a grant acknowledged at %v", grants[i-1].Round(time.Millisecond))}
			}
		}
	}
	return nil
}

// overstay: a holder that kept a grant with a hold TTL — no release,
// close or loss — past the latest end a correct lockd allows the hold
// (checker.HoldTTLBound), then looked at it: an observe of the name or
// its release invoked after that end. What lockd answered is the
// checkers' to judge.
func overstay(events []history.Event) []string {
	bound := checker.NewHoldTTLBound(events)
	type grant struct {
		name    string
		ok, ttl time.Duration
	}
	held := map[int][]grant{} // process -> its grants with a TTL, not yet released
	invoked := map[int]history.Event{}
	for _, e := range events {
		if e.Process < 0 {
			continue
		}
		switch {
		case e.Type == history.Invoke && (e.F == history.Observe || e.F == history.Release):
			for _, g := range held[e.Process] {
				if slices.Contains(e.Names, g.name) && bound.Over(g.ok, g.ttl, e.Time) {
					return []string{fmt.Sprintf("process %d kept %q, granted at %v with hold TTL %v", e.Process, g.name,
						g.ok.Round(time.Millisecond), g.ttl), fmt.Sprintf("and invoked %s of it at %v, past the hold's latest end", e.F,
						e.Time.Round(time.Millisecond))}
				}
			}
			if e.F == history.Release {
				held[e.Process] = slices.DeleteFunc(held[e.Process], func(g grant) bool { return slices.Contains(e.Names, g.name) })
			}
		case e.Type == history.Invoke && e.F == history.Close || e.F == history.Lost:
			delete(held, e.Process)
		case e.Type == history.Invoke:
			invoked[e.Process] = e
		case e.Type == history.OK && e.F == history.Acquire && invoked[e.Process].HoldTTL > 0:
			for _, g := range e.Granted {
				held[e.Process] = append(held[e.Process], grant{g.Name, e.Time, invoked[e.Process].HoldTTL})
			}
		}
	}
	return nil
}

// foreignProclaim: a proclaim the cluster acknowledged with another
// hold's token than the one it was sent under: a leader's value went to
// another leader's hold. What observers saw of it is the checkers' to
// judge.
func foreignProclaim(events []history.Event) []string {
	sent := map[int]history.Event{} // process -> its pending proclaim
	for _, e := range events {
		switch {
		case e.Process < 0 || e.F != history.Proclaim:
		case e.Type == history.Invoke:
			sent[e.Process] = e
		case e.Type == history.OK && e.Token != sent[e.Process].Token:
			inv := sent[e.Process]
			return []string{fmt.Sprintf("process %d proclaimed %q under token %d at %v", e.Process, inv.Text, inv.Token,
				inv.Time.Round(time.Millisecond)), fmt.Sprintf("acknowledged for the hold with token %d", e.Token)}
		}
	}
	return nil
}
