package fsm

import (
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
)

func TestSubscribeEvents(t *testing.T) {
	d := newDriver(t)
	sub := d.f.Subscribe(0)
	defer sub.Close()

	// Indexes: 1 and 2 create sessions, 3 grants x to a, 4 queues b (no
	// event), 5 fails (no event), 6 releases x and hands it to b.
	a := d.session()
	b := d.session()
	d.must(&lockstate.Acquire{Session: a, Locks: []lockstate.LockSpec{lock("x", lockstate.Write)}, RequestID: "ra"})
	d.must(&lockstate.Acquire{Session: b, Locks: []lockstate.LockSpec{lock("x", lockstate.Write)}, RequestID: "rb", Wait: time.Minute})
	d.apply(&lockstate.Release{Session: b, Name: "x"})
	d.must(&lockstate.Release{Session: a, Name: "x"})

	want := []Batch{
		{Index: 1, Events: []lockstate.Event{{Kind: lockstate.EvSessionCreated, Session: a}}},
		{Index: 2, Events: []lockstate.Event{{Kind: lockstate.EvSessionCreated, Session: b}}},
		{Index: 3, Events: []lockstate.Event{{Kind: lockstate.EvGranted, Session: a, RequestID: "ra", Name: "x", Token: 3}}},
		{Index: 6, Events: []lockstate.Event{
			{Kind: lockstate.EvReleased, Session: a, Name: "x", Token: 3},
			{Kind: lockstate.EvGranted, Session: b, RequestID: "rb", Name: "x", Token: 6},
		}},
	}
	for _, w := range want {
		select {
		case got := <-sub.C():
			if got.Index != w.Index || len(got.Events) != len(w.Events) {
				t.Fatalf("batch %+v, want %+v", got, w)
			}
			for i := range w.Events {
				if got.Events[i] != w.Events[i] {
					t.Fatalf("batch %d event %d: %+v, want %+v", w.Index, i, got.Events[i], w.Events[i])
				}
			}
		default:
			t.Fatalf("no batch for index %d", w.Index)
		}
	}
	select {
	case got := <-sub.C():
		t.Fatalf("extra batch %+v", got)
	default:
	}
}

// TestSlowSubscriber: a subscriber that never reads must not hold up
// Apply; it is ended with ErrLagged once its buffer is full, after the
// batches that fit.
func TestSlowSubscriber(t *testing.T) {
	d := newDriver(t)
	stuck := d.f.Subscribe(2)
	live := d.f.Subscribe(1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := d.session()
		for range 200 {
			d.must(&lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock("x", lockstate.Write)}})
			d.must(&lockstate.Release{Session: s, Name: "x"})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Apply blocked on a subscriber that does not read")
	}

	var got []uint64
	for b := range stuck.C() {
		got = append(got, b.Index)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("stuck subscriber got %v, want the first two batches", got)
	}
	if stuck.Err() != ErrLagged {
		t.Fatalf("stuck subscriber: %v", stuck.Err())
	}
	if n := len(live.C()); n != 401 || live.Err() != nil {
		t.Fatalf("live subscriber: %d batches, err %v", n, live.Err())
	}
}

func TestSubscriptionClose(t *testing.T) {
	d := newDriver(t)
	sub := d.f.Subscribe(0)
	sub.Close()
	sub.Close() // twice is fine
	d.session()
	if _, ok := <-sub.C(); ok {
		t.Fatal("batch after Close")
	}
	if sub.Err() != ErrUnsubscribed {
		t.Fatalf("Err %v", sub.Err())
	}
}

func TestRestoreEndsSubscriptions(t *testing.T) {
	src := newDriver(t)
	src.session()
	snap := snapshotBytes(t, src.f.FSM)

	d := newDriver(t)
	sub := d.f.Subscribe(0)
	d.session()
	if err := restoreBytes(d.f.FSM, snap); err != nil {
		t.Fatal(err)
	}
	if b, ok := <-sub.C(); !ok || b.Index != 1 {
		t.Fatalf("batch before the restore: %+v %t", b, ok)
	}
	if _, ok := <-sub.C(); ok {
		t.Fatal("subscription still open after restore")
	}
	if sub.Err() != ErrRestored {
		t.Fatalf("Err %v", sub.Err())
	}
}
