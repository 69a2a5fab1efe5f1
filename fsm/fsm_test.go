package fsm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/lockstate"
)

func TestApply(t *testing.T) {
	d := newDriver(t)
	s := d.session()
	if s != 1 {
		t.Fatalf("session id %d, want 1 (the creating entry's index)", s)
	}
	res := d.must(&lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock("db/orders", lockstate.Write)}})
	if res.Request.Status != lockstate.Granted || res.Request.Token != 2 {
		t.Fatalf("acquire: %+v", res.Request)
	}
	if got := d.f.AppliedIndex(); got != 2 {
		t.Fatalf("AppliedIndex %d, want 2", got)
	}
	var clock int64
	d.f.Read(func(tab *lockstate.Table) {
		clock = tab.Clock()
		if ok, cur := tab.Check("db/orders/1", 2); !ok || cur != 2 {
			t.Errorf("Check: %t %d", ok, cur)
		}
	})
	if clock != d.now {
		t.Fatalf("table clock %d, want the entry's now %d", clock, d.now)
	}
}

// TestApplyClockFromEntry: the FSM's clock is the entries' now, never the
// wall clock; a hold TTL runs out on entry time alone.
func TestApplyClockFromEntry(t *testing.T) {
	d := newDriver(t)
	d.now = 5 // 5ns after the epoch: far from any wall clock
	s := d.session()
	d.must(&lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock("x", lockstate.Write)}, HoldTTL: time.Second})
	d.advance(999 * time.Millisecond)
	if names := held(d.f.FSM, s); len(names) != 1 {
		t.Fatalf("held before the TTL: %v", names)
	}
	res := d.advance(time.Millisecond)
	if names := held(d.f.FSM, s); len(names) != 0 {
		t.Fatalf("held after the TTL: %v", names)
	}
	if len(res.Events) != 1 || res.Events[0].Kind != lockstate.EvExpired {
		t.Fatalf("tick events: %+v", res.Events)
	}
}

func TestApplyNonCommand(t *testing.T) {
	d := newDriver(t)
	d.session()
	before := d.f.Digest()
	for _, typ := range []raft.LogType{raft.LogNoop, raft.LogBarrier, raft.LogConfiguration} {
		if res := d.f.Apply(&raft.Log{Index: 10 + uint64(typ), Type: typ, Data: []byte{0xff}}); res != nil {
			t.Errorf("%v: response %#v", typ, res)
		}
	}
	if d.f.Digest() != before || d.f.AppliedIndex() != 1 || d.f.fatalCount() != 0 {
		t.Fatal("a non-command entry changed the FSM")
	}
}

func TestApplyIgnorableUnknownType(t *testing.T) {
	d := newDriver(t)
	d.session()
	before := d.f.Digest()
	changed := d.f.Changed()
	res := d.f.applyRaw(2, []byte{byte(IgnoreUnknownFlag | 0x33), 0xc1, 0xc1}) // body is never looked at
	if res != nil {
		t.Fatalf("response %#v, want nil", res)
	}
	if d.f.fatalCount() != 0 {
		t.Fatalf("fatal: %v", d.f.fatals)
	}
	if d.f.Digest() != before {
		t.Fatal("skipped entry changed the table")
	}
	if d.f.AppliedIndex() != 2 {
		t.Fatalf("AppliedIndex %d, want 2: a skipped entry is still applied", d.f.AppliedIndex())
	}
	select {
	case <-changed:
	default:
		t.Fatal("skipped entry did not wake watchers")
	}
	// The table carries on at the next index.
	d.index = 2
	d.session()
}

func TestApplyFatal(t *testing.T) {
	good, err := Encode(1, &lockstate.Tick{})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		index uint64
		data  []byte
	}{
		"empty":                    {2, nil},
		"garbage":                  {2, []byte("hello, world")},
		"truncated":                {2, good[:len(good)-1]},
		"unknown type":             {2, append([]byte{0x42}, good[1:]...)},
		"unknown field":            {2, body(t, CloseSessionType, []any{1, map[string]any{"session": 1, "x": 1}})},
		"index repeated":           {1, good},
		"index before the applied": {0, good},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := newDriver(t)
			d.session()
			before := d.f.Digest()
			sub := d.f.Subscribe(0)
			res := d.f.applyRaw(tc.index, tc.data)
			if d.f.fatalCount() != 1 {
				t.Fatalf("Fatal called %d times", d.f.fatalCount())
			}
			if !strings.Contains(d.f.fatals[0], "fsm: entry") {
				t.Errorf("fatal message %q", d.f.fatals[0])
			}
			if err, ok := res.(error); !ok || !errors.Is(err, ErrStopped) {
				t.Fatalf("response %#v, want ErrStopped", res)
			}
			if d.f.Digest() != before || d.f.AppliedIndex() != 1 {
				t.Fatal("fatal entry changed the FSM")
			}
			// Nothing is applied after a fatal entry, and waiters learn it.
			if res := d.f.applyRaw(5, good); !errors.Is(res.(error), ErrStopped) || d.f.fatalCount() != 2 {
				t.Fatalf("apply after fatal: %#v", res)
			}
			if err := d.f.WaitApplied(context.Background(), 5); !errors.Is(err, ErrStopped) {
				t.Fatalf("WaitApplied after fatal: %v", err)
			}
			if sub.Err() != nil {
				t.Fatalf("subscription: %v", sub.Err())
			}
		})
	}
}

func TestApplyFatalPanicsByDefault(t *testing.T) {
	f := New(Config{})
	defer func() {
		msg, ok := recover().(string)
		if !ok || !strings.Contains(msg, "entry 1") {
			t.Fatalf("recovered %#v", msg)
		}
	}()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{0}})
	t.Fatal("Apply returned")
}

// TestBadContent: well-formed commands with bad content return a domain
// error and leave the table exactly as it was.
func TestBadContent(t *testing.T) {
	d := newDriver(t)
	s := d.session()
	other := d.session()
	d.must(&lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "sem", Mode: lockstate.Write, Weight: 2, Limit: 3}}})
	d.must(&lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock("held", lockstate.Write)}, RequestID: "mine"})
	d.must(&lockstate.Acquire{Session: other, Locks: []lockstate.LockSpec{lock("held", lockstate.Write)}, Wait: time.Minute, RequestID: "waiting"})

	w := func(name string) []lockstate.LockSpec { return []lockstate.LockSpec{lock(name, lockstate.Write)} }
	cases := []struct {
		name string
		cmd  lockstate.Command
		code lockstate.Code
	}{
		{"acquire unknown session", &lockstate.Acquire{Session: 999, Locks: w("a")}, lockstate.CodeNoSession},
		{"oversized name", &lockstate.Acquire{Session: s, Locks: w(strings.Repeat("n", lockstate.MaxNameLen+1))}, lockstate.CodeInvalid},
		{"empty segment", &lockstate.Acquire{Session: s, Locks: w("a//b")}, lockstate.CodeInvalid},
		{"too many segments", &lockstate.Acquire{Session: s, Locks: w(strings.Repeat("a/", lockstate.MaxSegments) + "a")}, lockstate.CodeInvalid},
		{"control character", &lockstate.Acquire{Session: s, Locks: w("a\x00b")}, lockstate.CodeInvalid},
		{"no locks", &lockstate.Acquire{Session: s}, lockstate.CodeInvalid},
		{"too many locks", &lockstate.Acquire{Session: s, Locks: make([]lockstate.LockSpec, lockstate.MaxLocksPerReq+1)}, lockstate.CodeInvalid},
		{"name twice", &lockstate.Acquire{Session: s, Locks: append(w("a"), w("a")...)}, lockstate.CodeInvalid},
		{"bad mode", &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "a", Mode: 3}}}, lockstate.CodeInvalid},
		{"weight over limit", &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "sem", Mode: lockstate.Write, Weight: 4}}}, lockstate.CodeInvalid},
		{"weight over new limit", &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "new", Mode: lockstate.Write, Weight: 2}}}, lockstate.CodeInvalid},
		{"read with weight", &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "sem", Mode: lockstate.Read, Weight: 2}}}, lockstate.CodeInvalid},
		{"limit mismatch", &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "sem", Mode: lockstate.Write, Limit: 4}}}, lockstate.CodeLimitMismatch},
		{"limit over max", &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "x", Mode: lockstate.Write, Limit: lockstate.MaxLimit + 1}}}, lockstate.CodeInvalid},
		{"bad requirement", &lockstate.Acquire{Session: s, Locks: w("a"), Require: "most"}, lockstate.CodeInvalid},
		{"negative wait", &lockstate.Acquire{Session: s, Locks: w("a"), Wait: -1}, lockstate.CodeInvalid},
		{"wait too long", &lockstate.Acquire{Session: s, Locks: w("a"), Wait: lockstate.MaxWait + 1}, lockstate.CodeInvalid},
		{"hold_ttl too long", &lockstate.Acquire{Session: s, Locks: w("a"), HoldTTL: lockstate.MaxHoldTTL + 1}, lockstate.CodeInvalid},
		{"request id reserved", &lockstate.Acquire{Session: s, Locks: w("a"), RequestID: "~x"}, lockstate.CodeInvalid},
		{"request id too long", &lockstate.Acquire{Session: s, Locks: w("a"), RequestID: strings.Repeat("r", lockstate.MaxRequestIDLen+1)}, lockstate.CodeInvalid},
		{"request id of another session", &lockstate.Acquire{Session: s, Locks: w("a"), RequestID: "waiting"}, lockstate.CodeInvalid},
		{"ttl too short", &lockstate.CreateSession{TTL: time.Millisecond}, lockstate.CodeInvalid},
		{"ttl too long", &lockstate.CreateSession{TTL: lockstate.MaxTTL + 1}, lockstate.CodeInvalid},
		{"lock delay too long", &lockstate.CreateSession{TTL: time.Minute, LockDelay: time.Hour}, lockstate.CodeInvalid},
		{"bad on_deadlock", &lockstate.CreateSession{TTL: time.Minute, OnDeadlock: "panic"}, lockstate.CodeInvalid},
		{"session name too long", &lockstate.CreateSession{TTL: time.Minute, Name: strings.Repeat("s", lockstate.MaxSessionName+1)}, lockstate.CodeInvalid},
		{"close unknown session", &lockstate.CloseSession{Session: 999}, lockstate.CodeNoSession},
		{"expire unknown session", &lockstate.ExpireSession{Session: 999}, lockstate.CodeNoSession},
		{"release unknown session", &lockstate.Release{Session: 999, Name: "held"}, lockstate.CodeNoSession},
		{"release not held", &lockstate.Release{Session: other, Name: "held"}, lockstate.CodeNotHeld},
		{"release bad name", &lockstate.Release{Session: s, Name: "/"}, lockstate.CodeInvalid},
		{"release nothing", &lockstate.Release{Session: s}, lockstate.CodeInvalid},
		{"release name and request", &lockstate.Release{Session: s, Name: "held", RequestID: "mine"}, lockstate.CodeInvalid},
		{"release unknown request", &lockstate.Release{Session: s, RequestID: "nope"}, lockstate.CodeNoRequest},
		{"release pending request", &lockstate.Release{Session: other, RequestID: "waiting"}, lockstate.CodeNotHeld},
		{"surrender not held", &lockstate.Surrender{Session: other, Name: "held"}, lockstate.CodeNotHeld},
		{"surrender unknown session", &lockstate.Surrender{Session: 999, Name: "held"}, lockstate.CodeNoSession},
		{"cancel unknown request", &lockstate.Cancel{RequestID: "nope"}, lockstate.CodeNoRequest},
		{"cancel another session's request", &lockstate.Cancel{Session: s, RequestID: "waiting"}, lockstate.CodeNoRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := d.f.Digest()
			res := d.apply(tc.cmd)
			if res.Err == nil || res.Err.Code != tc.code {
				t.Fatalf("result %+v, want code %s", res, tc.code)
			}
			if len(res.Events) != 0 {
				t.Fatalf("events: %+v", res.Events)
			}
			if d.f.Digest() != before {
				t.Fatal("digest changed")
			}
		})
	}
	if d.f.fatalCount() != 0 {
		t.Fatalf("fatal: %v", d.f.fatals)
	}
}

func TestWaitApplied(t *testing.T) {
	d := newDriver(t)
	d.session()
	if err := d.f.WaitApplied(context.Background(), 1); err != nil {
		t.Fatalf("already applied: %v", err)
	}
	done := make(chan error)
	go func() { done <- d.f.WaitApplied(context.Background(), 3) }()
	d.advance(time.Second)
	select {
	case err := <-done:
		t.Fatalf("returned at index 2: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	d.advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- d.f.WaitApplied(ctx, 100) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestChanged(t *testing.T) {
	d := newDriver(t)
	ch := d.f.Changed()
	if ch != d.f.Changed() {
		t.Fatal("two waiters before an apply got different channels")
	}
	select {
	case <-ch:
		t.Fatal("closed before any apply")
	default:
	}
	d.session()
	select {
	case <-ch:
	default:
		t.Fatal("not closed by an apply")
	}
	if next := d.f.Changed(); next == ch {
		t.Fatal("same channel after the apply")
	}
}

// TestConcurrentReaders runs readers, waiters and subscribers against a
// stream of applies; the race detector checks the locking.
func TestConcurrentReaders(t *testing.T) {
	d := newDriver(t)
	stop := make(chan struct{})
	errc := make(chan error, 4)
	go func() {
		for {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			d.f.Read(func(tab *lockstate.Table) { _ = tab.Locks(""); _ = tab.WaitGraph(); _ = tab.Stats() })
			_ = d.f.Digest()
		}
	}()
	go func() {
		sub := d.f.Subscribe(0)
		defer sub.Close()
		var last uint64
		for {
			select {
			case <-stop:
				errc <- nil
				return
			case b, ok := <-sub.C():
				if !ok {
					errc <- sub.Err()
					return
				}
				if b.Index <= last {
					errc <- errors.New("batches out of order")
					return
				}
				last = b.Index
			}
		}
	}()
	go func() {
		errc <- d.f.WaitApplied(context.Background(), 300)
	}()
	s := d.session()
	for i := range 300 {
		name := []string{"a", "a/b", "b"}[i%3]
		if i%2 == 0 {
			d.apply(&lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock(name, lockstate.Write)}})
		} else {
			d.apply(&lockstate.Release{Session: s, Name: name})
		}
	}
	if err := <-errc; err != nil { // the waiter
		t.Fatal(err)
	}
	close(stop)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
