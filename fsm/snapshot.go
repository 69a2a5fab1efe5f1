package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/lockstate"
)

// SnapshotFormat is the version of the snapshot stream below. Restore
// refuses other versions.
const SnapshotFormat = 1

// recordType tags each record in a snapshot stream. Values are stored in
// snapshots: never reuse or renumber one.
type recordType uint8

const (
	recHeader  recordType = 1 // snapshotHeader
	recTable   recordType = 2 // lockstate.Header
	recSession recordType = 3 // lockstate.SessionRecord
	recNode    recordType = 4 // lockstate.NodeRecord
	recRequest recordType = 5 // lockstate.RequestRecord
	recEnd     recordType = 6 // no body; nothing may follow
)

// snapshotHeader opens a snapshot with the FSM's own state.
type snapshotHeader struct {
	Format  int    `msgpack:"format"`
	Applied uint64 `msgpack:"applied"` // the FSM's applied index; may pass the table's after skipped entries
}

// snapshot is a consistent copy of the table's export records, taken under
// the lock by Snapshot and encoded by Persist while Apply goes on.
type snapshot struct {
	header   snapshotHeader
	table    lockstate.Header
	sessions []lockstate.SessionRecord
	nodes    []lockstate.NodeRecord
	requests []lockstate.RequestRecord
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// Snapshot copies the table's export records into memory. Raft calls it
// from the FSM goroutine, so no Apply runs meanwhile; Persist then runs
// concurrently with later Applies on records the table no longer touches.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := &snapshot{header: snapshotHeader{Format: SnapshotFormat, Applied: f.applied.Load()}}
	err := f.table.Export(func(rec any) error {
		switch r := rec.(type) {
		case lockstate.Header:
			s.table = r
			s.sessions = make([]lockstate.SessionRecord, 0, r.Sessions)
			s.nodes = make([]lockstate.NodeRecord, 0, r.Nodes)
			s.requests = make([]lockstate.RequestRecord, 0, r.Requests)
		case lockstate.SessionRecord:
			s.sessions = append(s.sessions, r)
		case lockstate.NodeRecord:
			s.nodes = append(s.nodes, r)
		case lockstate.RequestRecord:
			s.requests = append(s.requests, r)
		default:
			return fmt.Errorf("unexpected export record %T", rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fsm: snapshot at index %d: %w", s.header.Applied, err)
	}
	return s, nil
}

// Persist writes the snapshot stream to sink and closes it, or cancels it
// on any error.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot at index %d: %w", s.header.Applied, err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("fsm: persist snapshot at index %d: close: %w", s.header.Applied, err)
	}
	return nil
}

// flushAt is how much of the stream write collects before writing it out.
const flushAt = 64 << 10

// write encodes the stream: each record is a msgpack uint8 tag followed by
// the record (see records.go), ending with recEnd.
func (s *snapshot) write(w io.Writer) error {
	b := make([]byte, 0, flushAt+4<<10)
	b = appendSnapshotHeader(appendTag(b, recHeader), &s.header)
	b = appendTableHeader(appendTag(b, recTable), &s.table)
	var err error
	if b, err = putAll(w, b, recSession, s.sessions, appendSession); err != nil {
		return err
	}
	if b, err = putAll(w, b, recNode, s.nodes, appendNode); err != nil {
		return err
	}
	if b, err = putAll(w, b, recRequest, s.requests, appendRequest); err != nil {
		return err
	}
	_, err = w.Write(appendTag(b, recEnd))
	return err
}

// putAll appends each of recs with tag t to b, writing b out and emptying
// it whenever it passes flushAt.
func putAll[T any](w io.Writer, b []byte, t recordType, recs []T, put func([]byte, *T) []byte) ([]byte, error) {
	for i := range recs {
		if b = put(appendTag(b, t), &recs[i]); len(b) >= flushAt {
			if _, err := w.Write(b); err != nil {
				return b, err
			}
			b = b[:0]
		}
	}
	return b, nil
}

// appendTag appends a record tag as msgpack's EncodeUint8 writes it.
func appendTag(b []byte, t recordType) []byte { return append(b, 0xcc, byte(t)) }

// Release drops the copied records.
func (s *snapshot) Release() {
	s.sessions, s.nodes, s.requests = nil, nil, nil
}

// Restore replaces the whole state with the snapshot in rc. It reads and
// checks every record and builds a new table before touching the FSM: a
// restore that fails for any reason returns an error and leaves the
// current table, applied index and subscriptions as they were. A
// successful one ends every subscription with ErrRestored.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	hdr, t, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	f.mu.Lock()
	f.table = t
	f.applied.Store(hdr.Applied)
	f.mu.Unlock()
	f.hub.endAll(ErrRestored)
	f.watch.Notify()
	f.logger.Info("restored snapshot", "applied", hdr.Applied, "table_index", t.Index())
	return nil
}

// errDecodePanic marks a restore that failed because a record decoder
// panicked: a bug, unlike a loader panic on a record it did not expect.
// FuzzRestore looks for it.
var errDecodePanic = errors.New("snapshot decoder panicked")

// readSnapshot decodes a whole snapshot stream into a new table.
func readSnapshot(r io.Reader) (hdr snapshotHeader, tab *lockstate.Table, err error) {
	// The loader works on a table nobody else can see yet, so a panic in it
	// (a record it did not expect) can be turned into a failed restore
	// without leaving anything half-changed. So can one in the decoders,
	// which only fill in records, but that one is a bug and says so.
	loading := false
	defer func() {
		if p := recover(); p != nil {
			tab = nil
			if loading {
				err = fmt.Errorf("loading records panicked: %v", p)
			} else {
				err = fmt.Errorf("%w: %v\n%s", errDecodePanic, p, debug.Stack())
			}
		}
	}()
	rr := recordReader{br: bufio.NewReaderSize(r, 64<<10)}
	if err := rr.expect(recHeader, func(r *mpReader) error { return decodeSnapshotHeader(r, &hdr) }); err != nil {
		return hdr, nil, err
	}
	if hdr.Format != SnapshotFormat {
		return hdr, nil, fmt.Errorf("snapshot format %d, this build reads %d", hdr.Format, SnapshotFormat)
	}
	var th lockstate.Header
	if err := rr.expect(recTable, func(r *mpReader) error { return decodeTableHeader(r, &th) }); err != nil {
		return hdr, nil, err
	}
	if hdr.Applied < th.Index {
		return hdr, nil, fmt.Errorf("applied index %d is before the table's %d", hdr.Applied, th.Index)
	}
	loading = true
	l, err := lockstate.NewLoader(th)
	loading = false
	if err != nil {
		return hdr, nil, err
	}
	var node lockstate.NodeRecord // Holds's array is reused from record to record: see decodeNode
	for {
		t, err := rr.tag()
		if err != nil {
			return hdr, nil, err
		}
		switch t {
		case recSession:
			var rec lockstate.SessionRecord
			if err = rr.decode(func(r *mpReader) error { return decodeSession(r, &rec) }); err == nil {
				loading = true
				err = l.Session(rec)
			}
		case recNode:
			if err = rr.decode(func(r *mpReader) error { return decodeNode(r, &node) }); err == nil {
				loading = true
				err = l.Node(node)
			}
		case recRequest:
			var rec lockstate.RequestRecord
			if err = rr.decode(func(r *mpReader) error { return decodeRequest(r, &rec) }); err == nil {
				loading = true
				err = l.Request(rec)
			}
		case recEnd:
			if err := rr.end(); err != nil {
				return hdr, nil, err
			}
			loading = true
			tab, err = l.Table()
			loading = false
			return hdr, tab, err
		}
		loading = false
		if err != nil {
			return hdr, nil, err
		}
	}
}

// recordReader reads the tagged records of a snapshot stream, checking the
// order of the tags: header, table, then sessions, nodes and requests
// (Export's order, which the loader relies on), then the end marker.
//
// Records are decoded straight out of the bufio.Reader's buffer, so that a
// restore copies each byte once and allocates only what the records keep.
// A record longer than the buffer is first read whole into buf, allocating
// only as its bytes arrive (see scan.go): the decoders check every length
// against the bytes in hand, so a record must be entirely in memory before
// they look at it.
type recordReader struct {
	br   *bufio.Reader
	eof  bool     // br's source has ended: what br holds is all there is
	buf  []byte   // the last record too long for br's buffer
	r    mpReader // here rather than on read's stack, where passing it to decode would make it escape
	last recordType
}

// refillBelow is how few buffered bytes make recordReader top br's buffer
// up before decoding, so that a record shorter than this never has to be
// decoded twice for running off the end of the buffer.
const refillBelow = 4 << 10

// tag reads the next record's tag.
func (rr *recordReader) tag() (recordType, error) {
	var b uint64
	// A buffered tag as write puts it skips the general path. (Peek only
	// what is buffered: a Peek that reads may swallow the source's EOF.)
	if p, _ := rr.br.Peek(min(2, rr.br.Buffered())); len(p) == 2 && p[0] == 0xcc {
		b = uint64(p[1])
		_, _ = rr.br.Discard(2)
	} else if err := rr.read(func(r *mpReader) (err error) {
		b, err = r.uint()
		return err
	}); err != nil {
		return 0, fmt.Errorf("record tag after %d: %w", rr.last, err)
	}
	t := recordType(b)
	repeatable := t >= recSession && t <= recRequest
	ok := b >= uint64(recHeader) && b <= uint64(recEnd) && (t > rr.last || (t == rr.last && repeatable)) &&
		(rr.last == 0) == (t == recHeader) && (rr.last == recHeader) == (t == recTable)
	if !ok {
		return 0, fmt.Errorf("record tag %d after %d: out of order or unknown", b, rr.last)
	}
	rr.last = t
	return t, nil
}

// expect reads a tag that must be want and its record with decode.
func (rr *recordReader) expect(want recordType, decode func(*mpReader) error) error {
	t, err := rr.tag()
	if err != nil {
		return err
	}
	if t != want {
		return fmt.Errorf("record tag %d, want %d", t, want)
	}
	return rr.decode(decode)
}

// decode reads the current record's body with decode.
func (rr *recordReader) decode(decode func(*mpReader) error) error {
	if err := rr.read(decode); err != nil {
		return fmt.Errorf("record %d: %w", rr.last, err)
	}
	return nil
}

// end checks that nothing follows the end marker.
func (rr *recordReader) end() error {
	if rr.br.Buffered() > 0 {
		return errors.New("data after the end of the snapshot")
	}
	if rr.eof {
		return nil
	}
	switch _, err := rr.br.ReadByte(); err {
	case io.EOF:
		return nil
	case nil:
		return errors.New("data after the end of the snapshot")
	default:
		return err
	}
}

// read decodes one msgpack value with decode, which must consume exactly
// one value and report running out of bytes as io.ErrUnexpectedEOF, as
// mpReader does. It decodes from br's buffer when the value is there; if
// it runs past the buffered bytes, it tops the buffer up and decodes
// again, and if the value is longer than the whole buffer, reads it whole
// into rr.buf and decodes it from there.
func (rr *recordReader) read(decode func(*mpReader) error) error {
	for refill := false; ; refill = true {
		win, err := rr.window(refill)
		if err != nil {
			return err
		}
		rr.r = mpReader{b: win}
		err = decode(&rr.r)
		if err == nil {
			_, _ = rr.br.Discard(rr.r.pos) // cannot fail: r.pos <= len(win) bytes are buffered
			return nil
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) || rr.eof {
			return err // decided by bytes in hand, or the stream is truncated
		}
		if refill || len(win) == rr.br.Size() {
			break
		}
	}
	var err error
	if rr.buf, err = readValue(rr.br, rr.buf[:0], maxDepth); err != nil {
		return noEOF(err)
	}
	rr.r = mpReader{b: rr.buf}
	if err := decode(&rr.r); err != nil {
		return err
	}
	if n := len(rr.r.left()); n != 0 {
		return fmt.Errorf("%d bytes left after decoding", n)
	}
	return nil
}

// window returns br's buffered bytes, first filling its buffer if fill is
// set or fewer than refillBelow bytes are left.
func (rr *recordReader) window(fill bool) ([]byte, error) {
	if !rr.eof && (fill || rr.br.Buffered() < refillBelow) {
		// Peek of the buffer's size reads until the buffer is full or the
		// source ends. It hands a read error over only once, so the end is
		// remembered rather than asked for again.
		switch _, err := rr.br.Peek(rr.br.Size()); err {
		case nil:
		case io.EOF:
			rr.eof = true
		default:
			return nil, err
		}
	}
	return rr.br.Peek(rr.br.Buffered())
}
