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

// A key may name a session unless it is all digits (a pre-key session's
// decimal id) or starts with "-" (a flag to a command line).
func TestUsableKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"4Yyb-e5n0mDD8K391SwTw_", true},
		{"_4Yyb-e5n0mDD8K391SwTw", true},
		{"-4Yyb-e5n0mDD8K391SwTw", false},
		{"1234567890123456789012", false},
		{"123456789012345678901-", true},
	} {
		if got := usableKey(tc.key); got != tc.want {
			t.Errorf("usableKey(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
	for range 2000 { // 1 in 64 raw draws starts with "-"
		key, err := NewSessionKey()
		if err != nil || !usableKey(key) || len(key) != 22 {
			t.Fatalf("NewSessionKey() = %q, %v", key, err)
		}
	}
}
