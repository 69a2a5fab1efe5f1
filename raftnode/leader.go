package raftnode

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// leadership is one term's leader duties: the goroutines that run them,
// the session deadlines they keep, and the term they are ready in.
type leadership struct {
	stop chan struct{} // closed when leadership is lost or the node stops
	done chan struct{} // closed when the duties have fully stopped
	ctx  context.Context
	// cancel ends ctx together with stop, for proposals made by duties.
	cancel context.CancelFunc

	term   uint64 // set before the duties are published as ready
	timers *sessionTimers
	// wg counts the duty goroutines and the expiry and tick proposals
	// they have in flight.
	wg sync.WaitGroup
}

func newLeadership() *leadership {
	ctx, cancel := context.WithCancel(context.Background())
	return &leadership{
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
		timers: newSessionTimers(),
	}
}

func (l *leadership) end() {
	close(l.stop)
	l.cancel()
}

// monitorLeadership is the only reader of raft's NotifyCh (consul's
// monitorLeadership): raft blocks on that channel, so this loop never
// waits on anything else (consul #6852). It starts leader duties on
// gaining leadership and stops them on losing it; a new term's duties wait
// for the previous ones to finish inside their own goroutine.
func (n *Node) monitorLeadership() {
	defer n.wg.Done()
	var (
		cur      *leadership
		prevDone <-chan struct{} = closedCh
	)
	stopCur := func() {
		if cur != nil {
			cur.end()
			prevDone = cur.done
			cur = nil
		}
	}
	for {
		select {
		case isLeader := <-n.notifyCh:
			switch {
			case isLeader && n.Diverged() != "":
				// A diverged node must not lead: its table answers nothing.
				go n.transferLeadership(context.Background())
			case isLeader && cur == nil && !n.stopping.Load():
				cur = newLeadership()
				n.wg.Add(1)
				go n.leaderLoop(cur, prevDone)
			case !isLeader:
				stopCur()
			}
		case reply := <-n.stopDuties:
			stopCur()
			reply <- prevDone
		case <-n.shutdownCh:
			stopCur()
			return
		}
	}
}

var closedCh = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// leaderLoop runs one term's duties: commit a barrier so that the table
// holds everything committed before this term, re-arm every session with
// a full TTL from now, publish readiness (reads and keepalives may be
// served), then run the session expiry and table ticks until stopped.
func (n *Node) leaderLoop(l *leadership, prevDone <-chan struct{}) {
	defer n.wg.Done()
	defer close(l.done)
	select {
	case <-prevDone:
	case <-l.stop:
		return
	}
	term, ok := n.establish(l)
	if !ok {
		return
	}
	n.clock.start(term) // the barrier applied the log: table time is known
	// Subscribe before reading the table, so no session event falls in
	// between; runSessionExpiry owns the subscription from here on.
	sub := n.fsm.Subscribe(0)
	n.resyncSessions(l)

	l.term = term
	n.lead.Store(l)
	n.changes.Notify()
	n.logger.Info("leader ready", "term", term, "sessions", l.timers.len())
	l.wg.Add(2)
	go n.runSessionExpiry(l, sub)
	go n.runTicks(l)

	<-l.stop
	n.lead.CompareAndSwap(l, nil)
	n.changes.Notify()
	l.wg.Wait() // proposals in flight end with l.ctx
	n.logger.Info("leader duties stopped", "term", term)
}

// establish commits a barrier in the current term and returns that term.
// Raft's barrier future returns once the FSM has applied everything before
// it, which is also the "commit in the current term" that read-index
// needs. It retries until it succeeds or leadership is lost.
func (n *Node) establish(l *leadership) (uint64, bool) {
	backoff := n.timing.retryMin
	for {
		term := n.raft.CurrentTerm()
		err := n.raft.Barrier(n.timing.leaderWait).Error()
		if err == nil && n.raft.CurrentTerm() == term && n.raft.State() == raft.Leader {
			return term, true
		}
		select {
		case <-l.stop:
			return 0, false
		default:
		}
		n.logger.Warn("leader barrier failed; retrying", "error", err)
		retry := time.NewTimer(backoff)
		select {
		case <-l.stop:
			retry.Stop()
			return 0, false
		case <-retry.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}
