package raftnode

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// TestStaleSnapshotHoldsTheStateBefore checks the snapshot control:
// restored, its second snapshot gives the state of the first (so a node
// restored from it misses what came between), where the safe FSM gives
// the state it had.
func TestStaleSnapshotHoldsTheStateBefore(t *testing.T) {
	machine := fsm.New(fsm.Config{})
	clocked := clockedFSM{machine, newTableClock(Config{}, time.Now)}
	stale := &staleFSM{clockedFSM: clocked}
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
