package fsm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/quorum"
)

// richState builds a table with something of everything: holds of each
// mode, a semaphore, reentrancy, queued single and multi-lock requests
// with wait deadlines, hold TTLs, a lock-delay, remembered requests and a
// skipped entry. It returns the driver.
func richState(t testing.TB) *driver {
	d := newDriver(t)
	a := d.session(func(c *lockstate.CreateSession) { c.Name = "a"; c.LockDelay = 3 * time.Second })
	b := d.session(func(c *lockstate.CreateSession) { c.OnDeadlock = lockstate.SurrenderLock })
	c := d.session()
	o := d.session(func(c *lockstate.CreateSession) { c.Ordered = true })
	gone := d.session(func(c *lockstate.CreateSession) { c.LockDelay = 10 * time.Second })

	acq := func(s lockstate.SessionID, id string, wait, holdTTL time.Duration, specs ...lockstate.LockSpec) {
		d.must(&lockstate.Acquire{Session: s, RequestID: id, Locks: specs, Wait: wait, HoldTTL: holdTTL})
	}
	acq(a, "a1", 0, 0, lock("db", lockstate.Read))
	acq(b, "b1", 0, 0, lock("db", lockstate.Read))
	acq(a, "a2", 0, 20*time.Second, lock("jobs/1", lockstate.Write))
	acq(a, "a3", 0, 0, lock("jobs/1", lockstate.Write)) // reentrant: count 2, TTL cleared
	acq(b, "b2", 0, 5*time.Second, lockstate.LockSpec{Name: "pool", Mode: lockstate.Write, Weight: 2, Limit: 3})
	acq(c, "c1", 0, 0, lockstate.LockSpec{Name: "pool", Mode: lockstate.Write, Weight: 1})
	acq(gone, "g1", 0, 0, lock("cache/x", lockstate.Write))
	acq(c, "c2", 40*time.Second, 0, lock("db/t", lockstate.Write))                           // waits for a and b
	acq(b, "b3", 15*time.Second, 0, lock("jobs", lockstate.Read), lock("x", lockstate.Read)) // waits for a on jobs/1
	d.must(&lockstate.Acquire{Session: c, RequestID: "c3", Wait: 8 * time.Second, Require: quorum.Any,
		Locks: []lockstate.LockSpec{lock("jobs/1", lockstate.Write), lock("pool", lockstate.Write)}})
	acq(o, "o1", 0, 0, lock("m", lockstate.Write))
	acq(o, "o2", 20*time.Second, 0, lockstate.LockSpec{Name: "pool", Mode: lockstate.Write}) // pool is full
	d.must(&lockstate.ExpireSession{Session: gone})                                          // cache/x delayed for 10s
	acq(a, "a4", 30*time.Second, 12*time.Second, lock("cache/x/y", lockstate.Write))
	d.index++
	if res := d.f.applyRaw(d.index, []byte{byte(IgnoreUnknownFlag | 99)}); res != nil {
		t.Fatalf("ignorable entry: %#v", res)
	}
	d.advance(time.Second)
	return d
}

func TestSnapshotRestore(t *testing.T) {
	d := richState(t)
	snap := snapshotBytes(t, d.f.FSM)
	f := newTestFSM(t)
	seedOther(t, f)
	if err := restoreBytes(f.FSM, snap); err != nil {
		t.Fatal(err)
	}
	sameState(t, "restored", d.f.FSM, f.FSM)
	var ti uint64
	f.Read(func(tab *lockstate.Table) { ti = tab.Index() })
	if f.AppliedIndex() != d.index || ti != d.index {
		t.Fatalf("applied %d, table %d, want %d", f.AppliedIndex(), ti, d.index)
	}
	// Every view agrees, not only the digest.
	views := func(f *FSM) (out []any) {
		f.Read(func(tab *lockstate.Table) {
			out = append(out, tab.Locks(""), tab.Sessions(), tab.WaitGraph(), tab.Stats())
			for _, id := range []string{"a1", "a3", "b3", "c2", "c3", "a4", "g1"} {
				r, ok := requestByID(tab, id)
				out = append(out, r, ok)
			}
		})
		return out
	}
	if a, b := views(d.f.FSM), views(f.FSM); !reflect.DeepEqual(a, b) {
		t.Fatalf("views differ:\n%+v\n%+v", a, b)
	}
	// A snapshot of the restored FSM is byte-for-byte the same stream.
	if again := snapshotBytes(t, f.FSM); !bytes.Equal(again, snap) {
		t.Fatal("snapshot of the restored FSM differs")
	}
}

// TestRestoreThenTick: a restored table fires hold TTLs, lock-delays and
// wait deadlines exactly as the original does.
func TestRestoreThenTick(t *testing.T) {
	d := richState(t)
	f := newTestFSM(t)
	if err := restoreBytes(f.FSM, snapshotBytes(t, d.f.FSM)); err != nil {
		t.Fatal(err)
	}
	counts := eventCounts{}
	for range 240 { // two minutes in quarter seconds: past every deadline
		d.now += int64(250 * time.Millisecond)
		d.index++
		want := d.f.applyAt(d.index, d.now, &lockstate.Tick{})
		got := f.applyAt(d.index, d.now, &lockstate.Tick{})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("tick at %d: results differ:\n%+v\n%+v", d.index, want, got)
		}
		sameState(t, "tick "+itoa(int(d.index)), d.f.FSM, f.FSM)
		counts.add(want)
	}
	for _, k := range []lockstate.EventKind{lockstate.EvExpired, lockstate.EvTimeout, lockstate.EvGranted} {
		if counts[k] == 0 {
			t.Errorf("no %v events while ticking: %v", k, counts)
		}
	}
	t.Logf("events while ticking: %v", counts)
}

// TestPersistWhileApplying: Persist runs while later entries are applied
// and still writes the state as of Snapshot. Run with -race.
func TestPersistWhileApplying(t *testing.T) {
	d := richState(t)
	want := d.f.Digest()
	snap, err := d.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	done := make(chan error)
	go func() { done <- snap.Persist(&sink) }()
	g := newGen(rand.New(rand.NewPCG(3, 3)))
	g.now = d.now
	for i := range 500 {
		cmd := g.next(d.f.FSM)
		g.observe(cmd, d.f.applyAt(d.index+uint64(i)+1, g.now, cmd))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	snap.Release()
	f := newTestFSM(t)
	if err := restoreBytes(f.FSM, sink.Bytes()); err != nil {
		t.Fatal(err)
	}
	if f.Digest() != want {
		t.Fatal("persisted state is not the state at Snapshot")
	}
}

func TestPersistCancelsOnError(t *testing.T) {
	d := richState(t)
	snap, err := d.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := memSink{failAfter: 10}
	if err := snap.Persist(&sink); !errors.Is(err, errSinkFull) {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.cancelled || sink.closed {
		t.Fatalf("cancelled=%t closed=%t", sink.cancelled, sink.closed)
	}
}

// stream builds a snapshot stream from tag, record pairs.
func stream(t *testing.T, parts ...any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, p := range parts {
		if err := enc.Encode(p); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// TestRestoreRejects covers the record layer with format 1 streams built
// by msgpack itself: format 2 carries the same records, and
// TestRestoreRejectsChunks covers its framing.
func TestRestoreRejects(t *testing.T) {
	hdr := snapshotHeader{Format: snapshotFormat1, Applied: 5}
	th := lockstate.Header{Format: lockstate.FormatVersion, Index: 5, Sessions: 1}
	sess := lockstate.SessionRecord{ID: 1, TTL: time.Second, Done: []string{}}
	node := lockstate.NodeRecord{Name: "a", Version: 3, Limit: 1, Holds: []lockstate.HoldRecord{{Session: 1, Mode: lockstate.Write, Weight: 1, Count: 1, Token: 3}}}
	th1 := th
	th1.Nodes = 1
	stringID := map[string]any{"id": "1", "name": "", "ttl": 1, "on_deadlock": "", "ordered": false, "lock_delay": 0, "done": []string{}}
	cases := map[string][]byte{
		"nothing":             nil,
		"no end":              stream(t, recHeader, hdr, recTable, th, recSession, sess),
		"wrong format":        stream(t, recHeader, snapshotHeader{Format: SnapshotFormat + 1, Applied: 5}, recTable, th, recSession, sess, recEnd),
		"format 0":            stream(t, recHeader, snapshotHeader{Format: 0, Applied: 5}, recTable, th, recSession, sess, recEnd),
		"wrong table format":  stream(t, recHeader, hdr, recTable, lockstate.Header{Format: 9}, recEnd),
		"applied before":      stream(t, recHeader, snapshotHeader{Format: snapshotFormat1, Applied: 4}, recTable, th, recSession, sess, recEnd),
		"table first":         stream(t, recTable, th, recHeader, hdr, recSession, sess, recEnd),
		"two headers":         stream(t, recHeader, hdr, recHeader, hdr, recTable, th, recSession, sess, recEnd),
		"node before session": stream(t, recHeader, hdr, recTable, th1, recNode, node, recSession, sess, recEnd),
		"unknown tag":         stream(t, recHeader, hdr, recTable, th, recSession, sess, 7, recEnd),
		"missing session":     stream(t, recHeader, hdr, recTable, th, recEnd),
		"extra session":       stream(t, recHeader, hdr, recTable, th, recSession, sess, recSession, lockstate.SessionRecord{ID: 2}, recEnd),
		"hold by nobody":      stream(t, recHeader, hdr, recTable, th1, recSession, lockstate.SessionRecord{ID: 2}, recNode, node, recEnd),
		"unknown field":       stream(t, recHeader, map[string]any{"format": 1, "applied": 5, "x": 1}, recTable, th, recSession, sess, recEnd),
		"missing field":       stream(t, recHeader, map[string]any{"format": 1}, recTable, th, recSession, sess, recEnd),
		"field of wrong type": stream(t, recHeader, hdr, recTable, th, recSession, stringID, recEnd),
		"huge array":          append(stream(t, recHeader, hdr, recTable, th1, recSession, sess, recNode), 0x85, 0xa4, 'n', 'a', 'm', 'e', 0xa1, 'a', 0xa5, 'h', 'o', 'l', 'd', 's', 0xdd, 0xff, 0xff, 0xff, 0xff),
		"after end":           append(stream(t, recHeader, hdr, recTable, th, recSession, sess, recEnd), 0xc0),
	}
	// The well-formed base restores, so the cases fail for their own reason.
	if err := restoreBytes(newTestFSM(t).FSM, stream(t, recHeader, hdr, recTable, th1, recSession, sess, recNode, node, recEnd)); err != nil {
		t.Fatalf("base stream: %v", err)
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			f := newTestFSM(t)
			seedOther(t, f)
			before := f.Digest()
			err := restoreBytes(f.FSM, b)
			if err == nil {
				t.Fatal("restore succeeded")
			}
			if !strings.HasPrefix(err.Error(), "fsm: restore: ") {
				t.Errorf("error %q", err)
			}
			if f.Digest() != before || f.AppliedIndex() != 3 {
				t.Fatal("failed restore changed the FSM")
			}
		})
	}
}
