package checker

import (
	"slices"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// A hold with a hold TTL is over by its acquire's ok + TTL +
// HoldTTLSlack + the time of cluster faults since: an observe that saw it
// later, or an ok release invoked later, is flagged; anything earlier,
// or after faults that may delay an expiry, is not.
func TestHoldTTL(t *testing.T) {
	const ttl = 2 * time.Second
	late := ttl + HoldTTLSlack + 100*time.Millisecond // past the bound outside faults
	runCases(t, []histCase{
		{"released in time", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(time.Second)
			h.release(1, "m")
		}, true, ""},
		{"seen held before its TTL", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(time.Second)
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"seen held within the slack", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(ttl + HoldTTLSlack - 10*time.Millisecond)
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"observe invoked within the bound, answered after it", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(ttl + HoldTTLSlack - 10*time.Millisecond)
			h.add(history.Event{Type: history.Invoke, Process: 2, F: history.Observe, Names: []string{"m"}})
			h.sleep(time.Minute)
			h.add(history.Event{Type: history.OK, Process: 2, F: history.Observe, Names: []string{"m"}, Holders: []history.Holder{held(1, "write", 5)}})
		}, true, ""},
		{"an overstaying holder finds it gone", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(late)
			h.observe(1, "m", held(2, "write", 9))
			h.releaseInv(1, "m")
			h.done(1, history.Release, history.Fail, "not_held")
		}, true, ""},
		{"seen held past its TTL", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(late)
			h.observe(2, "m", held(1, "write", 5))
		}, false, ""},
		{"released ok past its TTL", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(late)
			h.release(1, "m")
		}, false, ""},
		{"an older token of the session is another hold", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(late)
			h.observe(2, "m", held(1, "write", 4))
		}, true, ""},
		{"a grant again renews the hold", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(ttl)
			h.lockTTL(1, "m", 5, ttl) // reentrant: the hold lasts as long as its longest-lived grant
			h.sleep(ttl + HoldTTLSlack - 10*time.Millisecond)
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"a grant again without a TTL keeps it", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.lock(1, "m", 5)
			h.sleep(late)
			h.release(1, "m")
		}, true, ""},
		{"a shorter grant again keeps the longer end", func(h *hb) {
			h.lockTTL(1, "m", 5, 10*time.Second)
			h.sleep(time.Second)
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(12 * time.Second)
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"granted without a TTL first", func(h *hb) {
			h.lock(1, "m", 5)
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(late)
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"a grant again of unknown outcome", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.acquire(1, wl("m"))
			h.done(1, history.Acquire, history.Info, "unavailable")
			h.sleep(late)
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"a grant again that failed changes nothing", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.acquire(1, wl("m"))
			h.done(1, history.Acquire, history.Fail, "timeout")
			h.sleep(late)
			h.observe(2, "m", held(1, "write", 5))
		}, false, ""},
		{"a kill between the grant and the observe", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(time.Second)
			h.fault(history.Start, "kill")
			h.sleep(8 * time.Second)
			h.fault(history.Stop, "kill")
			h.sleep(late)
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"a kill counts from the nemesis's event before it", func(h *hb) {
			h.fault(history.Start, "clock-bump")
			h.fault(history.Stop, "clock-bump")
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(5 * time.Second) // the kill was being applied
			h.fault(history.Start, "kill")
			h.fault(history.Stop, "kill")
			h.sleep(late + 2*time.Second) // past the bound counted from the kill's start
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"seen held past the bound and the kill's time", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(time.Second)
			h.fault(history.Start, "kill")
			h.sleep(8 * time.Second)
			h.fault(history.Stop, "kill")
			h.sleep(late + 8*time.Second + faultGrace)
			h.observe(2, "m", held(1, "write", 5))
		}, false, ""},
		{"a fault that never stopped", func(h *hb) {
			h.fault(history.Stop, "clock-bump")
			h.lockTTL(1, "m", 5, ttl)
			h.fault(history.Start, "partition-node")
			h.sleep(time.Hour)
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"the recovery before the final phase", func(h *hb) {
			h.fault(history.Start, "kill")
			h.fault(history.Stop, "kill")
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(time.Minute)
			h.phaseFinal()
			h.observe(2, "m", held(1, "write", 5))
		}, true, ""},
		{"clock faults and client pauses give no allowance", func(h *hb) {
			h.lockTTL(1, "m", 5, ttl)
			for _, f := range []string{"clock-bump", "clock-strobe", "client-pause"} {
				h.fault(history.Start, f)
				h.sleep(time.Minute)
				h.fault(history.Stop, f)
			}
			h.observe(2, "m", held(1, "write", 5))
		}, false, ""},
		{"a fault before the grant gives none either", func(h *hb) {
			h.fault(history.Start, "kill")
			h.sleep(time.Minute)
			h.fault(history.Stop, "kill")
			h.sleep(faultGrace)
			h.lockTTL(1, "m", 5, ttl)
			h.sleep(late)
			h.observe(2, "m", held(1, "write", 5))
		}, false, ""},
	}, func(ev []history.Event) Result { return HoldTTL(ev, Config{}) })
}

// All runs the hold-ttl checker on runs with hold TTLs only.
func TestAllChecksHoldTTLsWithHoldTTLs(t *testing.T) {
	for _, ttl := range []time.Duration{0, time.Second} {
		h := &hb{}
		if ttl > 0 {
			h.lockTTL(1, "m", 5, ttl)
		} else {
			h.lock(1, "m", 5)
		}
		h.release(1, "m")
		ran := slices.ContainsFunc(All(h.ev, Config{Workload: "mutex", Fenced: true}), func(r Result) bool { return r.Checker == "hold-ttl" })
		if ran != (ttl > 0) {
			t.Errorf("hold TTL %v: hold-ttl checker ran: %v", ttl, ran)
		}
	}
}
