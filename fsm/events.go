package fsm

import (
	"errors"
	"slices"
	"sync"

	"github.com/lockd/lockd/lockstate"
)

// DefaultSubscriptionBuffer is the channel buffer Subscribe uses when asked
// for none.
const DefaultSubscriptionBuffer = 1024

// Errors that end a subscription, returned by Subscription.Err.
var (
	// ErrLagged: the subscriber fell a whole buffer behind, so a batch
	// could not be delivered. It must re-read the table and subscribe again.
	ErrLagged = errors.New("fsm: subscriber fell behind; batches were dropped")
	// ErrRestored: a snapshot replaced the whole table, which no batch
	// describes. The subscriber must re-read the table and subscribe again.
	ErrRestored = errors.New("fsm: table replaced by a snapshot restore")
	// ErrUnsubscribed: Close was called.
	ErrUnsubscribed = errors.New("fsm: subscription closed")
)

// Batch is what one applied entry changed: its index and the events the
// table emitted, in order. Events is shared with the proposer's result and
// every other subscriber: do not modify it.
type Batch struct {
	Index  uint64
	Events []lockstate.Event
}

// Subscription delivers a Batch for every applied entry that emitted
// events, in index order, with no gaps. Apply never waits for it: when the
// buffer is full the subscription is ended with ErrLagged instead of
// dropping a batch silently, so a subscriber either sees every event or
// learns that it must resynchronise (the etcd/Kubernetes watch contract).
// Batches arrive after their entry is applied; by the time a subscriber
// reads the table it may be further on.
type Subscription struct {
	c   chan Batch
	hub *hub
	err error // guarded by hub.mu; set just before c is closed
}

// C returns the channel batches arrive on. It is closed when the
// subscription ends; Err then says why.
func (s *Subscription) C() <-chan Batch { return s.c }

// Err returns why the subscription ended (ErrLagged, ErrRestored or
// ErrUnsubscribed), or nil while it is live.
func (s *Subscription) Err() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.err
}

// Close ends the subscription. It is safe to call more than once and
// concurrently with Apply.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.end(s, ErrUnsubscribed)
}

// Subscribe starts a subscription whose channel buffers up to buffer
// batches (DefaultSubscriptionBuffer if buffer < 1). It sees entries
// applied after it returns; read the table after subscribing to get the
// state the first batch builds on.
func (f *FSM) Subscribe(buffer int) *Subscription {
	if buffer < 1 {
		buffer = DefaultSubscriptionBuffer
	}
	s := &Subscription{c: make(chan Batch, buffer), hub: &f.hub}
	f.hub.mu.Lock()
	f.hub.subs = append(f.hub.subs, s)
	f.hub.mu.Unlock()
	return s
}

// hub fans batches out to subscriptions.
type hub struct {
	mu   sync.Mutex
	subs []*Subscription
}

// publish hands b to every subscription without blocking, ending those
// whose buffer is full.
func (h *hub) publish(b Batch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 0; i < len(h.subs); {
		s := h.subs[i]
		select {
		case s.c <- b:
			i++
		default:
			h.end(s, ErrLagged) // removes s from subs: do not advance i
		}
	}
}

// endAll ends every subscription with err.
func (h *hub) endAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.subs) > 0 {
		h.end(h.subs[0], err)
	}
}

// end removes s and closes its channel; h.mu must be held.
func (h *hub) end(s *Subscription, err error) {
	i := slices.Index(h.subs, s)
	if i < 0 {
		return // already ended
	}
	h.subs = slices.Delete(h.subs, i, i+1)
	s.err = err
	close(s.c)
}
