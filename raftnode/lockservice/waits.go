package lockservice

import (
	"context"
	"sync"
	"time"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// Waiting is local: once an acquire's entry is applied here, this node
// follows the request in its own table, whoever the leader is. One FSM
// subscription per node feeds a registry of waits keyed by request (its
// session and id: sessions may share an id), so an applied entry wakes
// exactly the waits it concerns instead of every long-poll in flight.

// requestKey names a request: its id is unique within its session.
type requestKey struct {
	session lockstate.SessionID
	id      string
}

// requestWaits wakes the waits on a request when an applied entry emits
// an event for it.
type requestWaits struct {
	fsm  *fsm.FSM
	done chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	byReq map[requestKey]map[chan struct{}]struct{}
}

func newRequestWaits(f *fsm.FSM) *requestWaits {
	w := &requestWaits{fsm: f, done: make(chan struct{}), byReq: make(map[requestKey]map[chan struct{}]struct{})}
	sub := f.Subscribe(0) // subscribe before anyone waits: no event is missed
	w.wg.Add(1)
	go w.follow(sub)
	return w
}

// follow wakes the waits of every request an applied entry mentions.
func (w *requestWaits) follow(sub *fsm.Subscription) {
	defer w.wg.Done()
	for {
		select {
		case batch, ok := <-sub.C():
			if !ok {
				// Lagged or restored from a snapshot: events were lost, so
				// every wait re-reads the table.
				sub = w.fsm.Subscribe(0)
				w.wakeAll()
				continue
			}
			for _, ev := range batch.Events {
				if ev.RequestID != "" {
					w.wake(requestKey{ev.Session, ev.RequestID})
				}
			}
		case <-w.done:
			sub.Close()
			return
		}
	}
}

func (w *requestWaits) close() {
	close(w.done)
	w.wg.Wait()
}

// add registers a wait on request k. The channel receives a value when an
// event for k is applied; read the table after add to lose nothing. The
// returned function removes the wait.
func (w *requestWaits) add(k requestKey) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	set := w.byReq[k]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		w.byReq[k] = set
	}
	set[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(set, ch)
		if len(set) == 0 { // set is still byReq[k]: it is only dropped once empty
			delete(w.byReq, k)
		}
		w.mu.Unlock()
	}
}

func (w *requestWaits) wake(k requestKey) {
	w.mu.Lock()
	for ch := range w.byReq[k] {
		signal(ch)
	}
	w.mu.Unlock()
}

func (w *requestWaits) wakeAll() {
	w.mu.Lock()
	for _, set := range w.byReq {
		for ch := range set {
			signal(ch)
		}
	}
	w.mu.Unlock()
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // already signalled
	}
}

// waitContext returns a context that also ends when the service closes,
// so that every wait on this node ends promptly at shutdown.
func (s *Service) waitContext(parent context.Context) (context.Context, context.CancelFunc) {
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
	waitAborted                 // the caller went away or the service is closing
)

// requestState is a request as the local table last showed it.
type requestState struct {
	info        lockstate.RequestInfo
	found       bool // false: never created here, or forgotten with its closed session
	sessionLive bool // its session is open
}

// awaitRequest waits until session's request id is no longer pending in
// the local table, or until passes, and returns the last state seen.
func (s *Service) awaitRequest(ctx context.Context, id string, sess lockstate.SessionID, until time.Time) (requestState, waitEnd) {
	wake, remove := s.waits.add(requestKey{sess, id})
	defer remove()
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	for {
		var st requestState
		s.fsm.Read(func(t *lockstate.Table) {
			st.info, st.found = t.Request(sess, id)
			st.sessionLive = t.HasSession(sess)
		})
		if !st.found || st.info.Status != lockstate.Pending {
			return st, waitFinal
		}
		select {
		case <-wake:
		case <-timer.C:
			return st, waitTimedOut
		case <-ctx.Done():
			return st, waitAborted
		case <-s.closing:
			return st, waitAborted
		}
	}
}

// awaitChange waits until cond (read under the FSM's lock) holds or until
// passes; it reports whether cond held. Blocking queries use it.
func (s *Service) awaitChange(ctx context.Context, until time.Time, cond func(t *lockstate.Table) bool) bool {
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	for {
		changed := s.fsm.Changed() // take the channel before checking: no wake-up is lost
		var met bool
		s.fsm.Read(func(t *lockstate.Table) { met = cond(t) })
		if met {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		case <-s.closing:
			return false
		}
	}
}
