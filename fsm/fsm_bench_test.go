package fsm

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/lockstate"
)

const benchNow = int64(1_700_000_000_000_000_000)

func mustEncode(b *testing.B, cmd lockstate.Command) []byte {
	data, err := Encode(benchNow, cmd)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkApplyAcquireRelease measures uncontended acquire+release pairs
// through FSM.Apply, from pre-encoded entries: one session acquires a
// write lock on a fresh name and releases the one it took window entries
// earlier, so about window locks are held throughout.
func BenchmarkApplyAcquireRelease(b *testing.B) {
	const names, window = 1 << 14, 1 << 10
	f := New(Config{})
	l := &raft.Log{Type: raft.LogCommand, Index: 1, Data: mustEncode(b, &lockstate.CreateSession{TTL: 10 * time.Second})}
	f.Apply(l)
	acquire, release := make([][]byte, names), make([][]byte, names)
	for i := range names {
		name := fmt.Sprintf("bench/%05d", i)
		acquire[i] = mustEncode(b, &lockstate.Acquire{Session: 1, Locks: []lockstate.LockSpec{{Name: name, Mode: lockstate.Write}}})
		release[i] = mustEncode(b, &lockstate.Release{Session: 1, Name: name})
	}
	apply := func(data []byte) {
		l.Index++
		l.Data = data
		if res, ok := f.Apply(l).(*lockstate.Result); !ok || res.Err != nil {
			b.Fatalf("entry %d: %+v", l.Index, res)
		}
	}
	for i := range window { // fill the window
		apply(acquire[i])
	}

	b.ReportAllocs()
	i := window
	for b.Loop() {
		apply(acquire[i%names])
		apply(release[(i-window)%names])
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkDecodeAcquire isolates the decoding share of Apply.
func BenchmarkDecodeAcquire(b *testing.B) {
	data := mustEncode(b, &lockstate.Acquire{Session: 1, Locks: []lockstate.LockSpec{{Name: "bench/00001", Mode: lockstate.Write}}})
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkSnapshotRestore1M builds a table with 1,000,000 held locks
// (1000 sessions × 1000 names) and measures its heap, Snapshot (the part
// that holds up Apply), Persist to memory and Restore.
func BenchmarkSnapshotRestore1M(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1M-lock table")
	}
	benchSnapshotRestore(b, 1000, 1000)
}

// BenchmarkSnapshotRestore100kSessions is the same for the table of
// 100,000 live sessions that hold a lock each (the scale of issue 37):
// what a follower that restarts, or one that installs the leader's
// snapshot, loads.
func BenchmarkSnapshotRestore100kSessions(b *testing.B) {
	benchSnapshotRestore(b, 100_000, 1)
}

// benchSnapshotRestore builds sessions × perSession held locks through
// Apply and measures Snapshot, Persist and Restore of them.
func benchSnapshotRestore(b *testing.B, sessions, perSession int) {
	base := heapInUse()
	f := New(Config{})
	l := &raft.Log{Type: raft.LogCommand}
	apply := func(cmd lockstate.Command) {
		l.Index++
		l.Data = mustEncode(b, cmd)
		if res, ok := f.Apply(l).(*lockstate.Result); !ok || res.Err != nil {
			b.Fatalf("entry %d: %+v", l.Index, res)
		}
	}
	start := time.Now()
	for s := range sessions {
		apply(&lockstate.CreateSession{TTL: time.Minute})
		id := lockstate.SessionID(l.Index)
		for n := range perSession {
			apply(&lockstate.Acquire{Session: id, Locks: []lockstate.LockSpec{{Name: fmt.Sprintf("s%03d/n%03d", s, n), Mode: lockstate.Write}}})
		}
	}
	build := time.Since(start)
	tableHeap := heapInUse() - base
	var st lockstate.Stats
	f.Read(func(t *lockstate.Table) { st = t.Stats() })
	if st.Holds != sessions*perSession {
		b.Fatalf("%d holds", st.Holds)
	}
	want := f.Digest()

	var snapTime, persistTime, restoreTime time.Duration
	var copyHeap, streamBytes uint64
	var out *FSM
	for b.Loop() {
		before := heapInUse()
		t0 := time.Now()
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		copyHeap = heapInUse() - before
		sink := memSink{}
		sink.Grow(64 << 20)
		t2 := time.Now()
		if err := snap.Persist(&sink); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		snap.Release()
		streamBytes = uint64(sink.Len())
		out = New(Config{})
		if err := out.Restore(nopCloser{bytes.NewReader(sink.Bytes())}); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		snapTime += t1.Sub(t0)
		persistTime += t3.Sub(t2)
		restoreTime += t4.Sub(t3)
	}
	b.StopTimer()
	if out.Digest() != want {
		b.Fatal("restored table differs")
	}
	n := float64(b.N)
	b.ReportMetric(float64(tableHeap)/1e6, "table-MB")
	b.ReportMetric(float64(copyHeap)/1e6, "snapcopy-MB")
	b.ReportMetric(float64(streamBytes)/1e6, "stream-MB")
	b.ReportMetric(snapTime.Seconds()/n, "snapshot-s")
	b.ReportMetric(persistTime.Seconds()/n, "persist-s")
	b.ReportMetric(restoreTime.Seconds()/n, "restore-s")
	b.ReportMetric(build.Seconds(), "build-s")
}

// BenchmarkTableAcquireRelease is BenchmarkApplyAcquireRelease straight on
// lockstate.Table, without decoding or the FSM: the floor the FSM adds to.
func BenchmarkTableAcquireRelease(b *testing.B) {
	const names, window = 1 << 14, 1 << 10
	t := lockstate.New()
	index := uint64(1)
	t.Apply(lockstate.Entry{Index: index, Now: benchNow, Cmd: &lockstate.CreateSession{TTL: 10 * time.Second}})
	acquire, release := make([]lockstate.Command, names), make([]lockstate.Command, names)
	for i := range names {
		name := fmt.Sprintf("bench/%05d", i)
		acquire[i] = &lockstate.Acquire{Session: 1, Locks: []lockstate.LockSpec{{Name: name, Mode: lockstate.Write}}}
		release[i] = &lockstate.Release{Session: 1, Name: name}
	}
	apply := func(cmd lockstate.Command) {
		index++
		if res := t.Apply(lockstate.Entry{Index: index, Now: benchNow, Cmd: cmd}); res.Err != nil {
			b.Fatalf("entry %d: %v", index, res.Err)
		}
	}
	for i := range window {
		apply(acquire[i])
	}
	b.ReportAllocs()
	i := window
	for b.Loop() {
		apply(acquire[i%names])
		apply(release[(i-window)%names])
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}
