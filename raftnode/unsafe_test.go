//go:build lockd_faults

package raftnode

// The unsafe modes' tests (unsafe.go): each mode breaks the promise its
// negative control needs broken. They exist only in the build with the
// lockd_faults tag; `make test` runs them (see the Makefile).

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// unsafeMode returns a Config tweak that sets mode (Config.SetUnsafe).
func unsafeMode(t *testing.T, mode string) func(*Config) {
	return func(cfg *Config) {
		if err := cfg.SetUnsafe(mode); err != nil {
			t.Fatal(err)
		}
	}
}

// flawsOf returns the flaws SetUnsafe(mode) gives a node.
func flawsOf(t *testing.T, mode string) flaws {
	var cfg Config
	unsafeMode(t, mode)(&cfg)
	return cfg.flaws
}

func TestUnsafeModeUnknown(t *testing.T) {
	var cfg Config
	if err := cfg.SetUnsafe("yes"); err == nil {
		t.Fatal("SetUnsafe(\"yes\") accepted")
	}
}

// Under UnsafeWallClock a leader reads table time off its wall clock as
// it reads it: a step moves it.
func TestUnsafeWallClockReadsTheWallClock(t *testing.T) {
	const s = time.Second
	tt := clockRead{"the wall clock as read", wallAt(-10 * s), 2 * s, 5 * s, time.Hour, wallAt(5*s + time.Hour)}
	tt.check(t, flawsOf(t, UnsafeWallClock).clock)
}

// Under UnsafeWallClock a step of the leader's wall clock an hour forward
// moves table time with it, which is what the jepsen negative control
// relies on.
func TestUnsafeWallClockStepOnTheLeader(t *testing.T) {
	if !stepForward(t, unsafeMode(t, UnsafeWallClock)) {
		t.Fatal("table time did not jump with the leader's wall clock")
	}
}

// Under UnsafeWallClock a step of the leader's wall clock an hour back
// stops table time (lockstate never lets it go back), which keeps every
// hold.
func TestUnsafeWallClockStepBackOnTheLeader(t *testing.T) {
	if advanced := stepBack(t, unsafeMode(t, UnsafeWallClock)); advanced >= stepBackPause {
		t.Fatalf("table time advanced %v over %v after an hour's step back", advanced, stepBackPause)
	}
}

// The disk nemesis's negative control (UnsafeLyingDisk): a leader
// whose log writes fail answers its proposals as committed and asks for
// no stop, although its store never held them.
func TestUnsafeLyingDiskAcknowledgesWhatItDidNotPersist(t *testing.T) {
	failing := new(atomic.Bool)
	stopAsked := make(chan error, 3)
	var stores []raft.LogStore
	c := newTestCluster(t, 3, func(cfg *Config) {
		unsafeMode(t, UnsafeLyingDisk)(cfg)
		cfg.wrapLogs = func(s raft.LogStore) raft.LogStore {
			stores = append(stores, s)
			return failingLogs{s, failing}
		}
		cfg.StoreFailed = func(err error) { stopAsked <- err }
	})
	l := c.leader()
	createSession(t, l.get(), time.Minute)
	c.converged()
	failing.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, index, err := l.get().Propose(ctx, &lockstate.CreateSession{TTL: time.Minute})
	if err != nil || res.Err != nil {
		t.Fatalf("proposal on lying disks: %+v, %v; want it acknowledged", res, err)
	}
	if len(stores) < 3 {
		t.Fatalf("%d log stores wrapped, want 3", len(stores))
	}
	for _, s := range stores {
		var entry raft.Log
		if s.GetLog(index, &entry) == nil {
			t.Fatalf("entry %d acknowledged and in a store: the disk did not fail", index)
		}
	}
	select {
	case err := <-stopAsked:
		t.Fatalf("a lying node asked to stop: %v", err)
	default:
	}
}

// TestUnsafeNoFsyncLosesAcknowledgedEntries: the log store of
// UnsafeNoFsync acknowledges entries a power loss takes back, and keeps
// the prefix it last fsynced (TestBoltKeepsAcknowledgedEntries: lockd's
// keeps them all).
func TestUnsafeNoFsyncLosesAcknowledgedEntries(t *testing.T) {
	if last := lastAfterPowerLoss(t, flawsOf(t, UnsafeNoFsync), noFsyncEvery+2); last != noFsyncEvery {
		t.Errorf("last index after a power loss: %d, want %d", last, noFsyncEvery)
	}
}

// Under UnsafeNoHoldTTL, the negative control, an acquire with a hold TTL
// leaves a hold the table never ends (TestHoldTTLEndsHolds: it does).
func TestUnsafeNoHoldTTLKeepsHolds(t *testing.T) { holdEnds(t, unsafeMode(t, UnsafeNoHoldTTL), false) }

// TestUnsafeStaleSnapshotHoldsTheStateBefore checks the snapshot control:
// restored, its second snapshot gives the state of the first (so a node
// restored from it misses what came between), where the safe FSM gives
// the state it had.
func TestUnsafeStaleSnapshotHoldsTheStateBefore(t *testing.T) {
	machine := fsm.New(fsm.Config{})
	clocked := clockedFSM{machine, newTableClock(Config{}, time.Now)}
	stale := flawsOf(t, UnsafeStaleSnapshot).machine(clocked)
	index := uint64(0)
	openSession := func() {
		index++
		data, err := fsm.Encode(int64(index), &lockstate.CreateSession{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res := clocked.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}); res != nil {
			if err, ok := res.(error); ok {
				t.Fatal(err)
			}
		}
	}
	restored := func(m raft.FSM) [32]byte {
		snap, err := m.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Release()
		var sink memorySink
		if err := snap.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		fresh := fsm.New(fsm.Config{})
		if err := fresh.Restore(readCloser{&sink}); err != nil {
			t.Fatal(err)
		}
		return fresh.Digest()
	}

	openSession()
	first := machine.Digest()
	if got := restored(stale); got != first {
		t.Fatal("the first stale snapshot is not the state it was taken at")
	}
	openSession()
	openSession()
	if machine.Digest() == first {
		t.Fatal("new sessions left the digest as it was: the comparisons below prove nothing")
	}
	if got := restored(clocked); got != machine.Digest() {
		t.Fatal("the safe snapshot is not the current state")
	}
	if got := restored(stale); got != first {
		t.Fatal("the second stale snapshot is not the state of the first")
	}
	if got := restored(stale); got != machine.Digest() {
		t.Fatal("the third stale snapshot is not the state of the second")
	}
}

// readCloser gives a memorySink's bytes to Restore.
type readCloser struct{ *memorySink }

func (readCloser) Close() error { return nil }

// Under UnsafeStaleProclaim, the election checker's negative control, a
// deposed leader's proclaim is accepted and gives its value to the leader
// that followed it, under that leader's token, on every node.
func TestUnsafeStaleProclaimGivesTheValueToTheLeader(t *testing.T) {
	res, tokB, values := deposedProclaim(t, unsafeMode(t, UnsafeStaleProclaim))
	if res.Err != nil || res.Proclaimed == nil || res.Proclaimed.Token != tokB {
		t.Fatalf("proclaim of the deposed leader: %+v %+v, want accepted under token %d", res.Err, res.Proclaimed, tokB)
	}
	for _, v := range values {
		if v != "stale" {
			t.Fatalf("the leader's value %q, want the deposed leader's, \"stale\"", v)
		}
	}
}
