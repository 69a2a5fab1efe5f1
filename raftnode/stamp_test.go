package raftnode

import (
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// An acquire with a hold TTL, proposed through a follower, leaves a hold
// that the table will end (an expiry on the table clock); under
// UnsafeNoHoldTTL, the negative control, a hold it never ends.
func TestUnsafeNoHoldTTLKeepsHolds(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		t.Run(map[bool]string{false: "safe", true: "unsafe no-hold-ttl"}[unsafe], func(t *testing.T) {
			c := newTestCluster(t, 3, func(cfg *Config) { cfg.UnsafeNoHoldTTL = unsafe })
			n := c.followers(c.leader())[0].get()
			s := createSession(t, n, time.Hour)
			acquire(t, n, s, "held", "r1", 0, time.Hour)
			c.converged()
			for _, tn := range c.nodes {
				var info lockstate.LockInfo
				var deadline bool
				tn.get().FSM().Read(func(tab *lockstate.Table) {
					info, _ = tab.Lock("held")
					_, deadline = tab.NextDeadline()
				})
				if len(info.Holders) != 1 {
					t.Fatalf("%s: holders %+v, want the session's hold", tn.id, info.Holders)
				}
				if ends := info.Holders[0].Expires != 0 && deadline; ends == unsafe {
					t.Errorf("%s: the hold ends by its TTL: %v (expires %d), want %v", tn.id, ends, info.Holders[0].Expires, !unsafe)
				}
			}
		})
	}
}
