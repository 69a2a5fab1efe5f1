package api

import (
	"context"
	"sync"
	"time"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// Waiting is local: once an acquire's entry is applied here, this node
// follows the request in its own table, whoever the leader is. One FSM
// subscription per node feeds a registry of waiters keyed by request id,
// so an applied entry wakes exactly the waits it concerns instead of every
// long-poll in flight.

// watchers wakes the waits on a request id when an applied entry emits an
// event for it.
type watchers struct {
	f    *fsm.FSM
	done chan struct{}
	wg   sync.WaitGroup

	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

func newWatchers(f *fsm.FSM) *watchers {
	w := &watchers{f: f, done: make(chan struct{}), m: make(map[string]map[chan struct{}]struct{})}
	sub := f.Subscribe(0) // subscribe before anyone waits: no event is missed
	w.wg.Add(1)
	go w.run(sub)
	return w
}

func (w *watchers) run(sub *fsm.Subscription) {
	defer w.wg.Done()
	for {
		select {
		case b, ok := <-sub.C():
			if !ok {
				// Lagged or restored from a snapshot: events were lost, so
				// every wait re-reads the table.
				sub = w.f.Subscribe(0)
				w.wakeAll()
				continue
			}
			for _, ev := range b.Events {
				if ev.RequestID != "" {
					w.wake(ev.RequestID)
				}
			}
		case <-w.done:
			sub.Close()
			return
		}
	}
}

func (w *watchers) close() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
}

// watch registers a wait on id. The channel receives a value when an event
// for id is applied; read the table after watch to lose nothing.
func (w *watchers) watch(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	set := w.m[id]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		w.m[id] = set
	}
	set[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(set, ch)
		if len(set) == 0 { // set is still w.m[id]: it is only dropped once empty
			delete(w.m, id)
		}
		w.mu.Unlock()
	}
}

func (w *watchers) wake(id string) {
	w.mu.Lock()
	for ch := range w.m[id] {
		notify(ch)
	}
	w.mu.Unlock()
}

func (w *watchers) wakeAll() {
	w.mu.Lock()
	for _, set := range w.m {
		for ch := range set {
			notify(ch)
		}
	}
	w.mu.Unlock()
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // already signalled
	}
}

// waitContext returns a context that also ends when the server closes, so
// that every wait on this node ends promptly at shutdown.
func (s *Server) waitContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// waitEnd says why awaitRequest returned.
type waitEnd int

const (
	waitFinal    waitEnd = iota // the request is final (or gone from the table)
	waitTimedOut                // until passed with the request still pending
	waitAborted                 // the client went away or the server is closing
)

// awaitRequest waits until request id is no longer pending in the local
// table or until passes. It returns the last state seen; ok is false when
// the table does not know the request (never created here, or forgotten
// with its closed session), and sessionLive says whether its session —
// the given one, or the request's own — is open.
func (s *Server) awaitRequest(ctx context.Context, id string, sess lockstate.SessionID, until time.Time) (info lockstate.RequestInfo, ok, sessionLive bool, end waitEnd) {
	ch, unwatch := s.watch.watch(id)
	defer unwatch()
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	s.metrics.waiting.Inc()
	defer s.metrics.waiting.Dec()
	for {
		s.fsm.Read(func(t *lockstate.Table) {
			info, ok = t.Request(id)
			if ok {
				sess = info.Session
			}
			sessionLive = sess != 0 && t.HasSession(sess)
		})
		if !ok || info.Status != lockstate.Pending {
			return info, ok, sessionLive, waitFinal
		}
		select {
		case <-ch:
		case <-timer.C:
			return info, ok, sessionLive, waitTimedOut
		case <-ctx.Done():
			return info, ok, sessionLive, waitAborted
		case <-s.closing:
			return info, ok, sessionLive, waitAborted
		}
	}
}

// awaitChange waits until cond (read under the FSM's lock) holds or until
// passes; it reports whether cond held. Blocking queries use it.
func (s *Server) awaitChange(ctx context.Context, until time.Time, cond func(t *lockstate.Table) bool) bool {
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	s.metrics.waiting.Inc()
	defer s.metrics.waiting.Dec()
	for {
		ch := s.fsm.Changed() // take the channel before checking: no wake-up is lost
		var met bool
		s.fsm.Read(func(t *lockstate.Table) { met = cond(t) })
		if met {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		case <-s.closing:
			return false
		}
	}
}
