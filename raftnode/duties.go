package raftnode

import (
	"errors"
	"time"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// The leader's duties are two jobs, each a goroutine of its own per term
// (started by leaderLoop, ended by the leadership's stop channel, waited
// for through its WaitGroup): runSessionExpiry keeps the sessions'
// keepalive deadlines and expires the sessions that miss them, runTicks
// proposes a Tick when one of the table's own deadlines passes. Both
// propose in short-lived goroutines, so a slow commit never delays a
// decision: a session whose deadline passes is marked expiring at once
// (its keepalives refused), whatever is still in flight.

const (
	// maxDeadlineSleep caps a sleep towards a deadline (a session's on
	// the node's clock, or the table's in table time), so a clock that a
	// test moves (Config.Now) is noticed within it.
	maxDeadlineSleep = time.Second
	// maxDutyBackoff caps the wait between retries of a failed expiry or
	// tick proposal.
	maxDutyBackoff = time.Second
)

// runSessionExpiry keeps the session deadlines in step with the FSM's
// session events and expires the sessions that miss them, through an
// expirer (expiry.go). It owns sub, which leaderLoop took before arming
// the timers from the table; when sub ends it resubscribes and resyncs
// the timers with the table.
func (n *Node) runSessionExpiry(l *leadership, sub *fsm.Subscription) {
	defer l.wg.Done()
	defer func() { sub.Close() }() // the current one, after resubscribing
	wake := time.NewTimer(maxDeadlineSleep)
	defer wake.Stop()
	exp := newExpirer(n, l)
	defer exp.pause.Stop()
	for {
		n.expireDue(l, wake, exp)
		exp.start()
		select {
		case <-l.stop:
			return
		case batch, open := <-sub.C():
			if !open {
				n.logger.Debug("session subscription ended; resyncing", "reason", sub.Err())
				// Subscribe before reading the table, as leaderLoop does.
				sub = n.fsm.Subscribe(0)
				n.resyncSessions(l)
				continue
			}
			n.sessionEvents(l, batch)
		case <-l.timers.wake:
		case <-wake.C:
		case o := <-exp.done:
			exp.finished(o)
		case <-exp.pause.C:
			exp.resumed()
		}
	}
}

// expireDue hands the expirer every session whose deadline has passed,
// in deadline order, and sets wake for the next deadline.
func (n *Node) expireDue(l *leadership, wake *time.Timer, exp *expirer) {
	now := n.now()
	ids, next, ok := l.timers.due(now)
	exp.add(ids)
	if ok {
		wake.Reset(min(next.Sub(now), maxDeadlineSleep))
	} else {
		wake.Stop()
	}
}

// sessionEvents arms created sessions and forgets ended ones.
func (n *Node) sessionEvents(l *leadership, batch fsm.Batch) {
	for _, ev := range batch.Events {
		switch ev.Kind {
		case lockstate.EvSessionCreated:
			var (
				info lockstate.SessionInfo
				ok   bool
			)
			n.fsm.Read(func(t *lockstate.Table) { info, ok = t.Session(ev.Session) })
			if ok { // gone already if a later entry ended it
				l.timers.arm(ev.Session, info.TTL, n.now().Add(info.TTL))
			}
		case lockstate.EvSessionClosed, lockstate.EvSessionExpired:
			l.timers.drop(ev.Session)
		}
	}
}

// runTicks proposes a Tick whenever the table's next deadline (hold TTL,
// lock-delay, wait) has passed on the leader's clock.
func (n *Node) runTicks(l *leadership) {
	defer l.wg.Done()
	ticks := &tickProposer{n: n, l: l, wake: time.NewTimer(maxDeadlineSleep), done: make(chan error, 1)}
	defer ticks.wake.Stop()
	changed := n.fsm.Changed() // before looking, so no change is missed
	ticks.check()
	for {
		select {
		case <-l.stop:
			return
		case <-changed:
			changed = n.fsm.Changed()
			ticks.check()
		case <-ticks.wake.C:
			ticks.backingOff = false
			ticks.check()
		case err := <-ticks.done:
			ticks.finished(err)
		}
	}
}

// tickProposer is runTicks' state: at most one Tick in flight, and a
// backoff after a Tick failed or left the table's deadline where it was.
// A backoff is timed by wake, not by the clock, so a clock that stands
// still or is moved back does not stretch it.
type tickProposer struct {
	n    *Node
	l    *leadership
	wake *time.Timer // the next deadline's sleep, or the backoff
	done chan error  // the Tick in flight's outcome; buffered for the one

	inFlight   bool
	backingOff bool // until wake fires
	backoff    time.Duration
	lastFor    int64 // the table deadline the last Tick was proposed for
}

// check proposes a Tick when the table's next deadline has passed, and
// otherwise sets wake for when to look again. A Tick in flight or a
// backoff wakes the loop when it ends, and there is nothing to wait for
// without a deadline.
func (p *tickProposer) check() {
	if p.inFlight || p.backingOff {
		return
	}
	var (
		at      int64
		pending bool
	)
	p.n.fsm.Read(func(t *lockstate.Table) { at, pending = t.NextDeadline() })
	if !pending {
		p.wake.Stop()
		return
	}
	now, ok := p.n.clock.read(p.l.term)
	if !ok { // leadership moved on; the duties are about to stop
		p.wake.Reset(maxDeadlineSleep)
		return
	}
	if d := time.Duration(at - now); d > 0 {
		p.wake.Reset(min(d, maxDeadlineSleep))
		return
	}
	if at == p.lastFor && p.backoff == 0 {
		// The last Tick for this very deadline did not move it: do not
		// spin on it.
		p.n.logger.Warn("table deadline did not move after a tick", "deadline", at)
		p.backOff(maxDutyBackoff / 10)
		return
	}
	p.inFlight, p.lastFor = true, at
	p.wake.Stop()
	p.l.wg.Add(1)
	go p.propose()
}

// propose commits one Tick and reports the outcome on done.
func (p *tickProposer) propose() {
	defer p.l.wg.Done()
	_, _, err := p.n.proposeLocal(p.l.ctx, &lockstate.Tick{})
	if err != nil && !errors.Is(err, p.l.ctx.Err()) {
		p.n.logger.Warn("tick failed", "error", err)
	}
	p.done <- err // buffered: never blocks, also once runTicks has returned
}

// finished takes a Tick's outcome: a failure backs off, each time longer,
// and a success ends the backoff.
func (p *tickProposer) finished(err error) {
	p.inFlight = false
	if err != nil {
		p.backOff(min(max(2*p.backoff, p.n.timing.retryMin), maxDutyBackoff))
		return
	}
	p.backoff = 0
	p.check()
}

func (p *tickProposer) backOff(d time.Duration) {
	p.backoff, p.backingOff = d, true
	p.wake.Reset(d)
}
