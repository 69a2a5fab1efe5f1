package lockstate

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestValidate checks each command's content rules: what is refused, that
// the message starts with the offending field, and that Validate changes
// nothing. Apply must refuse the same commands with the same error, even
// when the session does not exist.
func TestValidate(t *testing.T) {
	w := func(name string) LockSpec { return LockSpec{Name: name, Mode: Write} }
	locks := func(ls ...LockSpec) []LockSpec { return ls }
	long := strings.Repeat("r", MaxRequestIDLen+1)
	for _, tc := range []struct {
		cmd    Command
		prefix string // "" means valid
	}{
		{&CreateSession{TTL: MinTTL}, ""},
		{&CreateSession{TTL: MaxTTL, Name: strings.Repeat("s", MaxSessionName), OnDeadlock: SurrenderLock, LockDelay: MaxLockDelay, Ordered: true}, ""},
		{&CreateSession{TTL: MinTTL - 1}, "ttl "},
		{&CreateSession{TTL: MaxTTL + 1}, "ttl "},
		{&CreateSession{TTL: MinTTL, LockDelay: -1}, "lock_delay "},
		{&CreateSession{TTL: MinTTL, LockDelay: MaxLockDelay + 1}, "lock_delay "},
		{&CreateSession{TTL: MinTTL, Name: strings.Repeat("s", MaxSessionName+1)}, "name "},
		{&CreateSession{TTL: MinTTL, Name: "\xff"}, "name "},
		{&CreateSession{TTL: MinTTL, OnDeadlock: "retry"}, "on_deadlock "},
		{&CloseSession{Session: 1}, ""},
		{&CloseSession{}, "session "},
		{&ExpireSession{Session: 1}, ""},
		{&ExpireSession{}, "session "},
		{&ExpireSessions{Sessions: []SessionID{3, 1, 2}}, ""},
		{&ExpireSessions{Sessions: make([]SessionID, MaxExpireBatch)}, "session "}, // zero ids
		{&ExpireSessions{}, "sessions: 0 named"},
		{&ExpireSessions{Sessions: make([]SessionID, MaxExpireBatch+1)}, "sessions: 1025 named"},
		{&ExpireSessions{Sessions: []SessionID{4, 0}}, "session "},
		{&ExpireSessions{Sessions: []SessionID{4, 5, 4}}, "session 4 named twice"},

		{&Acquire{Session: 1, Locks: locks(w("a"), LockSpec{Name: "b", Mode: Read}, LockSpec{Name: "s", Mode: Write, Weight: 3, Limit: 3}),
			Require: "majority", Wait: MaxWait, HoldTTL: MaxHoldTTL, RequestID: "job-1"}, ""},
		{&Acquire{Session: 1, Locks: locks(LockSpec{Name: "s", Mode: Write, Weight: 5})}, ""}, // the table's limit decides
		{&Acquire{Locks: locks(w("a"))}, "session "},
		{&Acquire{Session: 1}, "locks "},
		{&Acquire{Session: 1, Locks: make([]LockSpec, MaxLocksPerReq+1)}, "locks "},
		{&Acquire{Session: 1, Locks: locks(w("a")), Require: "most"}, "require "},
		{&Acquire{Session: 1, Locks: locks(w("a")), Wait: -1}, "wait "},
		{&Acquire{Session: 1, Locks: locks(w("a")), Wait: MaxWait + 1}, "wait "},
		{&Acquire{Session: 1, Locks: locks(w("a")), HoldTTL: -time.Second}, "hold_ttl "},
		{&Acquire{Session: 1, Locks: locks(w("a")), HoldTTL: MaxHoldTTL + 1}, "hold_ttl "},
		{&Acquire{Session: 1, Locks: locks(w("a")), RequestID: "~auto-1"}, "request_id "},
		{&Acquire{Session: 1, Locks: locks(w("a")), RequestID: "a/b"}, "request_id "},
		{&Acquire{Session: 1, Locks: locks(w("a")), RequestID: "a\x01"}, "request_id "},
		{&Acquire{Session: 1, Locks: locks(w("a")), RequestID: "\xff"}, "request_id "},
		{&Acquire{Session: 1, Locks: locks(w("a")), RequestID: long}, "request_id "},
		{&Acquire{Session: 1, Locks: locks(w("a//b"))}, "lock name "},
		{&Acquire{Session: 1, Locks: locks(w(""))}, "lock name "},
		{&Acquire{Session: 1, Locks: locks(LockSpec{Name: "a", Mode: 3})}, `lock "a": mode`},
		{&Acquire{Session: 1, Locks: locks(LockSpec{Name: "a", Mode: Write, Limit: -1})}, `lock "a": limit`},
		{&Acquire{Session: 1, Locks: locks(LockSpec{Name: "a", Mode: Write, Limit: MaxLimit + 1})}, `lock "a": limit`},
		{&Acquire{Session: 1, Locks: locks(LockSpec{Name: "a", Mode: Write, Weight: -1})}, `lock "a": weight`},
		{&Acquire{Session: 1, Locks: locks(LockSpec{Name: "a", Mode: Read, Weight: 2})}, `lock "a": weight`},
		{&Acquire{Session: 1, Locks: locks(LockSpec{Name: "a", Mode: Write, Weight: 4, Limit: 3})}, `lock "a": weight`},
		{&Acquire{Session: 1, Locks: locks(w("a"), w("a"))}, `lock "a" is named twice`},

		{&Release{Session: 1, Name: "a"}, ""},
		{&Release{Session: 1, RequestID: "~surrender-3"}, ""},
		{&Release{Name: "a"}, "session "},
		{&Release{Session: 1}, "name or request_id "},
		{&Release{Session: 1, Name: "a", RequestID: "r"}, "name and request_id "},
		{&Release{Session: 1, Name: "/a"}, "lock name "},
		{&Surrender{Session: 1, Name: "a"}, ""},
		{&Surrender{Name: "a"}, "session "},
		{&Surrender{Session: 1}, "lock name "},
		{&Cancel{RequestID: "~auto-7"}, ""},
		{&Cancel{Session: 1, RequestID: "r"}, ""},
		{&Cancel{}, "request_id "},
		{&Cancel{RequestID: long}, "request_id "},
		{&Tick{}, ""},
	} {
		before := reflect.ValueOf(tc.cmd).Elem().Interface()
		before = deepCopy(before)
		err := tc.cmd.Validate()
		if !reflect.DeepEqual(before, reflect.ValueOf(tc.cmd).Elem().Interface()) {
			t.Errorf("%T %+v: Validate changed the command", tc.cmd, tc.cmd)
		}
		switch {
		case tc.prefix == "" && err != nil:
			t.Errorf("%T %+v: %v", tc.cmd, tc.cmd, err)
			continue
		case tc.prefix == "":
			continue
		case err == nil:
			t.Errorf("%T %+v: accepted, want %q...", tc.cmd, tc.cmd, tc.prefix)
			continue
		case err.Code != CodeInvalid || !strings.HasPrefix(err.Message, tc.prefix):
			t.Errorf("%T %+v: %v, want invalid_request %q...", tc.cmd, tc.cmd, err, tc.prefix)
		}
		// Content is checked before the table: the session (999, or the
		// one in the command) need not exist.
		d := newDriver(t)
		if res := d.apply(tc.cmd); !reflect.DeepEqual(res.Err, err) {
			t.Errorf("%T %+v: Apply says %v, Validate %v", tc.cmd, tc.cmd, res.Err, err)
		}
	}
}

// deepCopy copies a command value with its Locks slice, the one field a
// Validate could change through a shallow copy.
func deepCopy(v any) any {
	if a, ok := v.(Acquire); ok {
		a.Locks = append([]LockSpec(nil), a.Locks...)
		return a
	}
	return v
}
