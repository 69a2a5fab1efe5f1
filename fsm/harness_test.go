package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/lockstate"
)

// testFSM is an FSM whose Fatal records instead of panicking.
type testFSM struct {
	*FSM
	t      testing.TB
	mu     sync.Mutex
	fatals []string
}

func newTestFSM(t testing.TB) *testFSM {
	tf := &testFSM{t: t}
	tf.FSM = New(Config{Fatal: func(msg string) {
		tf.mu.Lock()
		defer tf.mu.Unlock()
		tf.fatals = append(tf.fatals, msg)
	}})
	return tf
}

func (tf *testFSM) fatalCount() int {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	return len(tf.fatals)
}

// applyRaw applies raw entry data at index.
func (tf *testFSM) applyRaw(index uint64, data []byte) any {
	return tf.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
}

// applyAt encodes cmd at now and applies it at index, failing the test on
// anything but a *lockstate.Result.
func (tf *testFSM) applyAt(index uint64, now int64, cmd lockstate.Command) *lockstate.Result {
	tf.t.Helper()
	b, err := Encode(now, cmd)
	if err != nil {
		tf.t.Fatalf("encode %T: %v", cmd, err)
	}
	res, ok := tf.applyRaw(index, b).(*lockstate.Result)
	if !ok {
		tf.t.Fatalf("apply %T at %d: response %#v", cmd, index, res)
	}
	return res
}

// driver is a test's stand-in for raft: it numbers entries and keeps a clock.
type driver struct {
	t     testing.TB
	f     *testFSM
	index uint64
	now   int64
}

func newDriver(t testing.TB) *driver {
	return &driver{t: t, f: newTestFSM(t), now: int64(1000 * time.Hour)}
}

func (d *driver) apply(cmd lockstate.Command) *lockstate.Result {
	d.t.Helper()
	d.index++
	return d.f.applyAt(d.index, d.now, cmd)
}

// must applies cmd and fails the test on a domain error.
func (d *driver) must(cmd lockstate.Command) *lockstate.Result {
	d.t.Helper()
	res := d.apply(cmd)
	if res.Err != nil {
		d.t.Fatalf("%T %+v: %v", cmd, cmd, res.Err)
	}
	return res
}

func (d *driver) session(opts ...func(*lockstate.CreateSession)) lockstate.SessionID {
	d.t.Helper()
	c := &lockstate.CreateSession{TTL: 10 * time.Second}
	for _, o := range opts {
		o(c)
	}
	return d.must(c).Session
}

func (d *driver) advance(dt time.Duration) *lockstate.Result {
	d.t.Helper()
	d.now += int64(dt)
	return d.must(&lockstate.Tick{})
}

func lock(name string, m lockstate.Mode) lockstate.LockSpec {
	return lockstate.LockSpec{Name: name, Mode: m}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
	failAfter         int // >0: Write fails once this many bytes are written
}

var errSinkFull = errors.New("sink full")

func (s *memSink) Write(p []byte) (int, error) {
	if s.failAfter > 0 && s.Len()+len(p) > s.failAfter {
		return 0, errSinkFull
	}
	return s.Buffer.Write(p)
}
func (s *memSink) ID() string     { return "mem" }
func (s *memSink) Close() error   { s.closed = true; return nil }
func (s *memSink) Cancel() error  { s.cancelled = true; return nil }
func (s *memSink) Reader() []byte { return s.Bytes() }

// snapshotBytes snapshots f and persists it to memory.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("Persist: closed=%t cancelled=%t", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

// restoreBytes restores b into f.
func restoreBytes(f *FSM, b []byte) error {
	return f.Restore(nopCloser{bytes.NewReader(b)})
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func itoa(i int) string { return strconv.Itoa(i) }

func sprintRecord(rec any) string { return fmt.Sprintf("%T%+v", rec, rec) }
