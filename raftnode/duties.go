package raftnode

import (
	"errors"
	"time"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

const (
	// maxTickSleep caps the sleep towards the table's next deadline, so a
	// wall clock that jumps (or a test that moves Config.Now) is noticed.
	maxTickSleep = time.Second
	// maxDutyBackoff caps the wait between retries of a failed expiry or
	// tick proposal.
	maxDutyBackoff = time.Second
)

// runDuties is the leader's one duties goroutine: a timer for the earliest
// session deadline, a timer for the table's next deadline, and the FSM's
// events and apply notifications to keep both current. Proposals it makes
// run in short-lived goroutines, so a slow commit never delays a timer.
func (n *Node) runDuties(l *leadership, sub **fsm.Subscription) {
	sessionTimer := time.NewTimer(time.Hour)
	defer sessionTimer.Stop()
	tickTimer := time.NewTimer(time.Hour)
	defer tickTimer.Stop()

	var tk ticker
	tickDone := make(chan error, 1)
	checkTick := func() {
		if d, ok := n.nextTick(l, &tk, tickDone); ok {
			tickTimer.Reset(d)
		} else {
			tickTimer.Stop()
		}
	}
	changed := n.fsm.Changed()
	checkTick()

	for {
		ids, next, ok := l.timers.due(time.Now())
		for _, id := range ids {
			l.wg.Add(1)
			go n.expireSession(l, id)
		}
		if ok {
			sessionTimer.Reset(time.Until(next))
		} else {
			sessionTimer.Stop()
		}

		select {
		case <-l.stop:
			return
		case b, open := <-(*sub).C():
			if !open {
				n.logger.Debug("session subscription ended; resyncing", "reason", (*sub).Err())
				*sub = n.fsm.Subscribe(0)
				n.resyncSessions(l)
				continue
			}
			n.sessionEvents(l, b)
		case <-l.timers.wake:
		case <-sessionTimer.C:
		case <-changed:
			changed = n.fsm.Changed()
			checkTick()
		case <-tickTimer.C:
			checkTick()
		case err := <-tickDone:
			tk.inFlight = false
			if err != nil {
				tk.backoff = min(max(2*tk.backoff, n.timing.retryMin), maxDutyBackoff)
				tk.notBefore = time.Now().Add(tk.backoff)
			} else {
				tk.backoff = 0
			}
			checkTick()
		}
	}
}

// sessionEvents arms created sessions and forgets ended ones.
func (n *Node) sessionEvents(l *leadership, b fsm.Batch) {
	for _, ev := range b.Events {
		switch ev.Kind {
		case lockstate.EvSessionCreated:
			var (
				info lockstate.SessionInfo
				ok   bool
			)
			n.fsm.Read(func(t *lockstate.Table) { info, ok = t.Session(ev.Session) })
			if ok { // gone already if a later entry ended it
				l.timers.arm(ev.Session, info.TTL, time.Now().Add(info.TTL))
			}
		case lockstate.EvSessionClosed, lockstate.EvSessionExpired:
			l.timers.drop(ev.Session)
		}
	}
}

// expireSession proposes the expiry of a session whose deadline passed,
// retrying with backoff until it commits or leadership ends. A session
// that is already gone (closed meanwhile, or an earlier attempt with an
// unknown outcome did commit) is fine.
func (n *Node) expireSession(l *leadership, id lockstate.SessionID) {
	defer l.wg.Done()
	backoff := n.timing.retryMin
	for {
		res, index, err := n.proposeLocal(l.ctx, &lockstate.ExpireSession{Session: id})
		if err == nil {
			if res.Err != nil && res.Err.Code != lockstate.CodeNoSession {
				n.logger.Error("session expiry refused", "session", id, "error", res.Err)
			} else if res.Err == nil {
				n.logger.Info("session expired", "session", id, "index", index)
			}
			l.timers.drop(id)
			return
		}
		if l.ctx.Err() != nil {
			return // the next leader re-arms it
		}
		n.logger.Warn("session expiry failed; retrying", "session", id, "error", err)
		t := time.NewTimer(backoff)
		select {
		case <-l.stop:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxDutyBackoff)
	}
}

// ticker is the duties goroutine's bookkeeping for Tick proposals.
type ticker struct {
	inFlight  bool      // at most one Tick at a time
	notBefore time.Time // backoff after a failed Tick
	backoff   time.Duration
	lastFor   int64 // the table deadline the last Tick was proposed for
}

// nextTick proposes a Tick when the table's next deadline (hold TTL,
// lock-delay, wait) has passed on the leader's clock, and otherwise says
// how long to sleep before looking again. ok is false when there is
// nothing to wait for (no deadline, or a Tick in flight whose answer
// wakes the loop).
func (n *Node) nextTick(l *leadership, tk *ticker, done chan<- error) (time.Duration, bool) {
	if tk.inFlight {
		return 0, false
	}
	var (
		at      int64
		pending bool
	)
	n.fsm.Read(func(t *lockstate.Table) { at, pending = t.NextDeadline() })
	if !pending {
		return 0, false
	}
	now := n.now()
	if wait := time.Until(tk.notBefore); wait > 0 {
		return wait, true
	}
	if d := time.Duration(at - now.UnixNano()); d > 0 {
		return min(d, maxTickSleep), true
	}
	if at == tk.lastFor && tk.backoff == 0 {
		// The last Tick for this very deadline did not move it: do not
		// spin on it.
		tk.backoff = maxDutyBackoff / 10
		tk.notBefore = time.Now().Add(tk.backoff)
		n.logger.Warn("table deadline did not move after a tick", "deadline", at)
		return tk.backoff, true
	}
	tk.inFlight, tk.lastFor = true, at
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		_, _, err := n.proposeLocal(l.ctx, &lockstate.Tick{})
		if err != nil && !errors.Is(err, l.ctx.Err()) {
			n.logger.Warn("tick failed", "error", err)
		}
		done <- err // buffered: one Tick at a time
	}()
	return 0, false
}
