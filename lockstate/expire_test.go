package lockstate

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestExpireSessionsGrantsInArrivalOrder: a batched expiry of sessions
// that each hold a lock two others wait for grants every lock to its
// first waiter, as one expiry per entry would; a holder that also waits
// in the batch is never granted; a session closed before the entry is
// skipped without undoing the rest; every ended session's expiry is an
// event, in the batch's order.
func TestExpireSessionsGrantsInArrivalOrder(t *testing.T) {
	const n = 6
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			d := newDriver(t)
			holders := make([]SessionID, n)
			first, second := make([]*RequestInfo, n), make([]*RequestInfo, n)
			for i := range n {
				holders[i] = d.session(func(c *CreateSession) { c.TTL = time.Minute })
				d.acquire(holders[i], fmt.Sprintf("jobs/%d", i), Write, 0)
			}
			for i := range n {
				first[i] = d.acquire(d.session(), fmt.Sprintf("jobs/%d", i), Write, time.Hour)
			}
			for i := range n {
				second[i] = d.acquire(d.session(), fmt.Sprintf("jobs/%d", i), Write, time.Hour)
			}
			// holders[1] also waits for jobs/0, ahead of nobody: it is in
			// the batch after holders[0], so it must never be granted.
			late := d.acquire(holders[1], "jobs/0", Write, time.Hour)
			closed := d.session()
			d.apply(&CloseSession{Session: closed})
			order := []SessionID{holders[3], holders[0], closed, holders[5], holders[1], holders[4], holders[2]}

			var events []Event
			if batched {
				res := d.apply(&ExpireSessions{Sessions: order})
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				events = res.Events
			} else {
				for _, id := range order {
					events = append(events, d.apply(&ExpireSession{Session: id}).Events...)
				}
			}
			var ended []SessionID
			for _, e := range events {
				if e.Kind == EvSessionExpired {
					ended = append(ended, e.Session)
				}
				if e.Kind == EvGranted && slices.Contains(holders, e.Session) {
					t.Errorf("an expired session was granted %s", e.Name)
				}
			}
			if want := slices.DeleteFunc(slices.Clone(order), func(id SessionID) bool { return id == closed }); !slices.Equal(ended, want) {
				t.Errorf("sessions expired %v, want %v", ended, want)
			}
			for i := range n {
				if d.status(first[i].ID) != Granted || d.status(second[i].ID) != Pending {
					t.Errorf("jobs/%d: first waiter %s, second %s", i, d.status(first[i].ID), d.status(second[i].ID))
				}
			}
			if _, ok := d.request(late.ID); ok {
				t.Error("an expired session's pending request is still known")
			}
			for _, id := range holders {
				if d.tab.HasSession(id) {
					t.Errorf("session %d still open", id)
				}
			}
		})
	}
}

// TestExpireSessionsOfGoneSessions: a batch whose sessions are all gone
// changes nothing but the index, like a Tick.
func TestExpireSessionsOfGoneSessions(t *testing.T) {
	d := newDriver(t)
	a := d.session()
	d.acquire(a, "x", Write, 0)
	d.apply(&ExpireSession{Session: a})
	twin := newDriver(t)
	for _, e := range d.log {
		twin.tab.Apply(e)
	}
	twin.index = d.index
	if res := d.apply(&ExpireSessions{Sessions: []SessionID{a, 999}}); res.Err != nil || len(res.Events) != 0 {
		t.Fatalf("expiring gone sessions: %+v", res)
	}
	twin.apply(&Tick{})
	if d.tab.Digest() != twin.tab.Digest() {
		t.Error("a batch of gone sessions changed the table")
	}
}
