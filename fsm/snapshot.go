package fsm

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime/debug"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/lockstate"
)

// SnapshotFormat is the newest version of the snapshot stream: Persist
// writes it only for a table that needs it, else an older one (see
// below). Restore reads formats 1 to 7.
//
// Format 1 is a msgpack stream of tagged records: each record is a
// msgpack uint8 tag followed by the record: the header (snapshotHeader),
// then the table's records (lockstate.Table.Export's: the table header,
// sessions, nodes and requests), each with its kind's tag (the registry of
// kinds, recordKinds, is in records.go), then recEnd, which has no body.
//
// Format 2 adds checksums. It starts with the header record
// exactly as format 1 writes it, with format 2, so that a build that reads
// only format 1 refuses the stream by its version; every byte after it is
// in chunks:
//
//	length (4 bytes, big endian, 1 to chunkSize), CRC-32C (4 bytes, big endian), payload (length bytes)
//
// The CRC-32C (Castagnoli) of a chunk is that of everything before it and
// its own payload: the header record and the payload bytes so far, so that
// a chunk is only good in its own place and the header is covered too.
// The payloads, joined, are format 1's records from the table header on,
// recEnd included, followed by the trailer: snapshotTrailer, the number of
// records before recEnd. The stream ends after the last chunk. A chunk
// holds whole records, as many as fit, or a chunkSize piece of a longer
// record (see chunkWriter); the reader relies on this only to name records.
//
// Format 3 (ACLs) is format 2 with three more record kinds after the
// requests: session extras, the ACL state and tokens.
//
// Format 4 is format 3 whose token records may carry the token's own
// limits (lockstate.TokenLimits).
//
// Format 5 is format 4 with one more record kind after the tokens: the
// certificate deny list, one record per denied serial.
//
// Format 6 is format 5 whose requests of two sessions may share a request
// id (log format FormatSessionRequestIDs), records unchanged. Restore
// refuses a stream of an older format whose requests share an id: that
// format cannot hold them.
//
// Format 7 is format 6 whose holds and requests' locks may carry a value
// (log format FormatHoldValues): the field "value" of a hold and of a
// lock, written only when there is one.
//
// Persist writes the oldest format (2 at least) that carries every record
// of the table, which each record's registry row says (the format its kind
// came in, or a later one for a record that holds what only that one can:
// a token with limits of its own, a node or request with a value), and
// format 6 for a table where two sessions share a request id, so that a
// build before it refuses the snapshot by its version rather than by a
// load error. A table that uses nothing of a later format is written byte
// for byte as before it: a cluster that does not use ACLs, session keys,
// revocation, token limits, the deny list, shared request ids or values
// can still send its snapshots to a node of the build before them.
const SnapshotFormat = snapshotFormatHoldValues

// snapshotFormatHoldValues is format 7, the first whose holds and locks
// may carry a value.
const snapshotFormatHoldValues = 7

// snapshotFormatSharedIDs is format 6, the first whose sessions may share
// a request id.
const snapshotFormatSharedIDs = 6

// snapshotFormat5 is format 6 without shared request ids, still written
// for a table where no two sessions share one.
const snapshotFormat5 = 5

// snapshotFormat4 is format 5 without the deny list, still written for a
// table that denies no certificate.
const snapshotFormat4 = 4

// snapshotFormat3 is format 4 without token limits, still written for a
// table that has none.
const snapshotFormat3 = 3

// snapshotFormat2 is format 3 without the ACL records, still written for a
// table that has none.
const snapshotFormat2 = 2

// snapshotFormat1 is the format before checksums, still read.
const snapshotFormat1 = 1

// chunkSize is the most payload a format 2 chunk carries: what is read
// and checked at a time.
const chunkSize = 64 << 10

// maxHeaderSize bounds the header record (36 bytes with every integer at
// its longest), which is read whole before the stream's format is known.
const maxHeaderSize = 64

// snapshotHeader opens a snapshot with the FSM's own state.
type snapshotHeader struct {
	Format  int    `msgpack:"format"`
	Applied uint64 `msgpack:"applied"` // the FSM's applied index; may pass the table's after skipped entries
}

// snapshotTrailer ends a format 2 snapshot, after recEnd.
type snapshotTrailer struct {
	Records uint64 `msgpack:"records"` // records before recEnd, the header and table header included
}

// snapshot is a consistent copy of the table's export records, taken under
// the lock by Snapshot and encoded by Persist while Apply goes on.
type snapshot struct {
	header snapshotHeader
	recs   []lockstate.Record // in Export's order, which is recordKinds'
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// Snapshot copies the table's export records into memory. Raft calls it
// from the FSM goroutine, so no Apply runs meanwhile; Persist then runs
// concurrently with later Applies on records the table no longer touches.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := &snapshot{header: snapshotHeader{Applied: f.applied.Load()}}
	err := f.table.Export(func(rec lockstate.Record) error {
		if h, ok := rec.(*lockstate.Header); ok { // the first: it counts the bulk of the others
			s.recs = make([]lockstate.Record, 0, 1+h.Sessions+h.Nodes+h.Requests)
		}
		s.recs = append(s.recs, rec)
		return nil
	})
	if err == nil {
		s.header.Format, err = streamFormat(s.recs, f.table.SharesRequestIDs())
	}
	if err != nil {
		return nil, fmt.Errorf("fsm: snapshot at index %d: %w", s.header.Applied, err)
	}
	return s, nil
}

// streamFormat returns the snapshot format of a stream of recs (see
// SnapshotFormat): the oldest that carries each of them, 2 at least, and
// format 6 at least for a table whose sessions share request ids. It
// fails for a record whose kind has no row in recordKinds, or not in
// their order.
func streamFormat(recs []lockstate.Record, sharedIDs bool) (int, error) {
	format, k := snapshotFormat2, 0
	for i, rec := range recs {
		if k = nextKind(k, rec); k == len(recordKinds) {
			return 0, fmt.Errorf("export record %d, a %T: no kind of the registry, or out of its order", i+1, rec)
		}
		format = max(format, recordKinds[k].formatFor(rec))
	}
	if sharedIDs {
		format = max(format, snapshotFormatSharedIDs)
	}
	return format, nil
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

// write encodes the stream in the format Snapshot chose (see
// SnapshotFormat): the header record, then the others in chunks. When a
// record takes the chunk past chunkSize, the records before it are written
// out as a chunk first.
func (s *snapshot) write(w io.Writer) error {
	head := appendSnapshotHeader(appendTag(nil, recHeader), &s.header)
	if _, err := w.Write(head); err != nil {
		return err
	}
	cw := &chunkWriter{w: w, crc: crc32.Checksum(head, castagnoli)}
	b := make([]byte, 0, chunkSize+4<<10)
	var err error
	k := 0
	for _, rec := range s.recs {
		k = nextKind(k, rec) // one of them: Snapshot checked
		kind := &recordKinds[k]
		n := len(b)
		if b = kind.put(appendTag(b, kind.tag), rec); len(b) > chunkSize {
			if b, err = cw.flush(b, n); err != nil {
				return err
			}
		}
	}
	n := len(b)
	tr := snapshotTrailer{Records: uint64(1 + len(s.recs))} // the header and the table's records
	if b = appendSnapshotTrailer(appendTag(b, recEnd), &tr); len(b) > chunkSize {
		if b, err = cw.flush(b, n); err != nil {
			return err
		}
	}
	return cw.chunk(b)
}

// chunkWriter writes a format 2 stream's payload as checksummed chunks.
// Chunks start at records, so that an error names the first record of
// the damaged one: a chunk holds whole records, as many as fit in
// chunkSize bytes, or a piece of one record longer than that.
type chunkWriter struct {
	w   io.Writer
	crc uint32 // CRC-32C of the stream's content so far
}

// flush writes b[:n], whole records, as a chunk, and then, if the record
// after them is longer than a chunk, its chunkSize pieces. It returns the
// rest of b, moved to its start.
func (cw *chunkWriter) flush(b []byte, n int) ([]byte, error) {
	if n > 0 {
		if err := cw.chunk(b[:n]); err != nil {
			return b, err
		}
	}
	for ; len(b)-n > chunkSize; n += chunkSize {
		if err := cw.chunk(b[n : n+chunkSize]); err != nil {
			return b, err
		}
	}
	return b[:copy(b, b[n:])], nil
}

// chunk writes p, 1 to chunkSize bytes, as one chunk.
func (cw *chunkWriter) chunk(p []byte) error {
	cw.crc = crc32.Update(cw.crc, castagnoli, p)
	var head [8]byte
	binary.BigEndian.PutUint32(head[:4], uint32(len(p)))
	binary.BigEndian.PutUint32(head[4:], cw.crc)
	if _, err := cw.w.Write(head[:]); err != nil {
		return err
	}
	_, err := cw.w.Write(p)
	return err
}

// appendTag appends a record tag as msgpack's EncodeUint8 writes it.
func appendTag(b []byte, t recordType) []byte { return append(b, 0xcc, byte(t)) }

// Release drops the copied records.
func (s *snapshot) Release() { s.recs = nil }

// snapshotRemedy tells the operator what to do about a snapshot that fails
// its checksum. Raft restores a node's own snapshots at startup, newest
// first, falling back to older ones, and a leader sends a new one when an
// install fails, so one failure heals itself; only a repeated one needs
// the operator.
const snapshotRemedy = "the snapshot was damaged on disk or on its way here, and this node's table is unchanged " +
	"(raft falls back to an older snapshot at startup, and a leader sends its snapshot again); " +
	"if it keeps failing, stop this node, remove it from the cluster (DELETE /v1/members/<id> on another node), " +
	"move its data dir away and start it again with an empty one and --join (\"Restore one node\" in docs/operations.md)"

// Restore replaces the whole state with the snapshot in rc, in either
// format Restore reads (see SnapshotFormat). It reads and checks every
// record, and in format 2 every checksum, and builds a new table before
// touching the FSM: a restore that fails for any reason returns an error
// and leaves the current table, applied index and subscriptions as they
// were. A successful one ends every subscription with ErrRestored.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	hdr, t, err := readSnapshot(rc)
	if errors.Is(err, ErrChecksum) {
		return fmt.Errorf("fsm: restore: %w; %s", err, snapshotRemedy)
	}
	if err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	f.mu.Lock()
	f.table = t
	f.changes++
	f.applied.Store(hdr.Applied)
	f.publishDenied(true)
	f.mu.Unlock()
	f.hub.endAll(ErrRestored)
	f.watch.Notify()
	f.logger.Info("restored snapshot", "format", hdr.Format, "applied", hdr.Applied, "table_index", t.Index())
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
	rr, hdr, err := openSnapshot(r)
	if err != nil {
		return hdr, nil, err
	}
	if tab, err = loadRecords(rr, &loading); err != nil {
		return hdr, nil, err
	}
	if hdr.Applied < tab.Index() {
		return hdr, nil, fmt.Errorf("applied index %d is before the table's %d", hdr.Applied, tab.Index())
	}
	if hdr.Format < snapshotFormatSharedIDs && tab.SharesRequestIDs() {
		return hdr, nil, fmt.Errorf("format %d snapshot whose sessions share request ids, which format %d is the first to hold", hdr.Format, snapshotFormatSharedIDs)
	}
	return hdr, tab, nil
}

// openSnapshot reads the header record at the start of a snapshot stream
// and returns a recordReader for the records after it: read straight from
// r in format 1, through checked chunks since format 2.
func openSnapshot(r io.Reader) (*recordReader, snapshotHeader, error) {
	br := bufio.NewReaderSize(r, chunkSize) // a chunk must fit: chunkReader checks it in br's buffer
	hdr, head, err := readSnapshotHeader(br)
	if err != nil {
		return nil, hdr, err
	}
	if hdr.Format < snapshotFormat1 || hdr.Format > SnapshotFormat {
		return nil, hdr, fmt.Errorf("snapshot format %d, this build reads %d to %d", hdr.Format, snapshotFormat1, SnapshotFormat)
	}
	rr := &recordReader{br: br, format: hdr.Format, last: recHeader, count: 1}
	if hdr.Format >= snapshotFormat2 {
		cr := &chunkReader{br: br, crc: crc32.Checksum(head, castagnoli)}
		rr.br = bufio.NewReaderSize(cr, 64<<10)
	}
	return rr, hdr, nil
}

// readSnapshotHeader reads the header record from the start of br. It
// returns the record's bytes too, which format 2's checksums cover.
func readSnapshotHeader(br *bufio.Reader) (snapshotHeader, []byte, error) {
	var hdr snapshotHeader
	p, _ := br.Peek(maxHeaderSize) // a shorter stream is refused below
	r := mpReader{b: p}
	t, err := r.uint()
	if err != nil {
		return hdr, nil, fmt.Errorf("record #1 (header): tag: %w", err)
	}
	if t != uint64(recHeader) {
		return hdr, nil, fmt.Errorf("record #1: tag %d where a snapshot starts with its header (%d)", t, recHeader)
	}
	if err := decodeSnapshotHeader(&r, &hdr); err != nil {
		return hdr, nil, fmt.Errorf("record #1 (header): %w", err)
	}
	head := bytes.Clone(p[:r.pos])
	_, _ = br.Discard(r.pos) // cannot fail: r.pos <= len(p) bytes are buffered
	return hdr, head, nil
}

// loadRecords reads the table's records, the table header first, and
// returns the table they make. It sets *loading while the loader runs, for
// readSnapshot's recover.
func loadRecords(rr *recordReader, loading *bool) (*lockstate.Table, error) {
	var l lockstate.Loader
	readers := make([]kindReader, len(recordKinds)) // each kind's, made at its first record
	for {
		t, err := rr.tag()
		if err != nil {
			return nil, err
		}
		if t == recEnd {
			if err := rr.finish(); err != nil {
				return nil, err
			}
			*loading = true
			tab, err := l.Table()
			*loading = false
			return tab, err
		}
		k := kindByTag[t] // a kind's: tag checked
		kr := readers[k]
		if kr == nil {
			kr = recordKinds[k].reader(recordKinds[k].reuse)
			readers[k] = kr
		}
		if err := rr.decode(kr.decode); err != nil {
			return nil, err
		}
		rec := kr.record()
		if f := recordKinds[k].formatFor(rec); f > rr.format {
			return nil, fmt.Errorf("record #%d (%v): only format %d carries it, the stream is format %d", rr.count, t, f, rr.format)
		}
		*loading = true
		err = l.Load(rec)
		*loading = false
		if err != nil {
			return nil, err
		}
	}
}

// recordReader reads the tagged records of a snapshot stream, checking the
// order of the tags: the header, then the kinds of records in the
// registry's order (Export's, which the loader relies on), each only in a
// format that carries it and those that are single at most once, then the
// end marker.
//
// Records are decoded straight out of the bufio.Reader's buffer, so that a
// restore copies each byte once and allocates only what the records keep.
// A record longer than the buffer is first read whole into buf, allocating
// only as its bytes arrive (see scan.go): the decoders check every length
// against the bytes in hand, so a record must be entirely in memory before
// they look at it.
//
// When br's source fails (in format 2, a chunk that fails its checksum),
// the bytes br already holds are still good: they are decoded as at the end
// of the stream, and the source's error is returned by the record that
// needs bytes past them. Chunks start at records, so that record is the
// first of the damaged chunk, and the error names it.
type recordReader struct {
	br     *bufio.Reader
	eof    bool     // br's source has ended or failed: what br holds is all there is
	srcErr error    // why br's source failed, if it did rather than end
	buf    []byte   // the last record too long for br's buffer
	r      mpReader // here rather than on read's stack, where passing it to decode would make it escape
	format int      // the stream's
	last   recordType
	count  int // records whose tag has been read, the header included
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
		return 0, fmt.Errorf("record #%d: tag after a %v record: %w", rr.count+1, rr.last, err)
	}
	t, k := recordType(b), kindOf(recordType(b))
	known := b <= 0xff && (t == recHeader || t == recEnd || k != nil && k.since <= rr.format)
	repeatable := k != nil && !k.single
	ok := known && (t.position() > rr.last.position() || (t == rr.last && repeatable)) &&
		(rr.last == 0) == (t == recHeader) && (rr.last == recHeader) == (t == recTable)
	if !ok {
		return 0, fmt.Errorf("record #%d: tag %d after a %v record: out of order or unknown", rr.count+1, b, rr.last)
	}
	rr.last = t
	rr.count++
	return t, nil
}

// decode reads the current record's body with decode.
func (rr *recordReader) decode(decode func(*mpReader) error) error {
	if err := rr.read(decode); err != nil {
		return fmt.Errorf("record #%d (%v): %w", rr.count, rr.last, err)
	}
	return nil
}

// finish reads what follows the end marker: nothing in format 1, the
// trailer since format 2, whose count of records must match the stream's.
func (rr *recordReader) finish() error {
	if rr.format != snapshotFormat1 {
		var tr snapshotTrailer
		if err := rr.decode(func(r *mpReader) error { return decodeSnapshotTrailer(r, &tr) }); err != nil {
			return err
		}
		if before := uint64(rr.count - 1); tr.Records != before {
			return fmt.Errorf("the trailer counts %d records before the end, the stream holds %d", tr.Records, before)
		}
	}
	return rr.end()
}

// end checks that nothing follows the end of the stream.
func (rr *recordReader) end() error {
	if rr.br.Buffered() > 0 {
		return errors.New("data after the end of the snapshot")
	}
	if rr.eof {
		return rr.srcErr
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
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			return err // decided by bytes in hand
		}
		if rr.eof {
			return cmp.Or(rr.srcErr, err) // the stream is truncated, or damaged past here
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
			rr.eof, rr.srcErr = true, err
		}
	}
	return rr.br.Peek(rr.br.Buffered())
}

// chunkReader reads the payload of a format 2 stream's chunks (see
// SnapshotFormat) from br, each only once its checksum matched. A chunk
// is checked in br's buffer, which it fits, and read from there.
type chunkReader struct {
	br   *bufio.Reader
	crc  uint32 // CRC-32C of the stream's content up to the current chunk's end
	cur  []byte // the current chunk's unread payload, in br's buffer
	size int    // the current chunk's length, to discard from br once read
	n    int    // chunks checked
	off  int64  // payload bytes before the current chunk
	err  error  // the first error, returned from then on
}

// Read reads payload bytes. It returns io.EOF where a chunk would start
// and the stream ends.
func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.cur) == 0 {
		if c.err == nil {
			c.err = c.next()
		}
		if c.err != nil {
			return 0, c.err
		}
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// next drops the chunk that has been read and checks the one after it.
func (c *chunkReader) next() error {
	_, _ = c.br.Discard(c.size) // cannot fail: Peek returned these bytes
	c.off += int64(c.size)
	c.size = 0
	h, err := c.br.Peek(8)
	if len(h) == 0 && err == io.EOF {
		return io.EOF
	}
	if err != nil {
		return c.errorf("head: %w", noEOF(err))
	}
	size, sum := binary.BigEndian.Uint32(h[:4]), binary.BigEndian.Uint32(h[4:])
	if size == 0 || size > chunkSize {
		return c.errorf("length %d out of range (1 to %d), damaged: %w", size, chunkSize, ErrChecksum)
	}
	_, _ = c.br.Discard(8)
	p, err := c.br.Peek(int(size))
	if err != nil {
		return c.errorf("%d of its %d bytes: %w", len(p), size, noEOF(err))
	}
	crc := crc32.Update(c.crc, castagnoli, p)
	if crc != sum {
		return c.errorf("fails its checksum (CRC-32C %08x, written as %08x): %w", crc, sum, ErrChecksum)
	}
	c.crc, c.cur, c.size = crc, p, int(size)
	c.n++
	return nil
}

func (c *chunkReader) errorf(format string, args ...any) error {
	return fmt.Errorf("chunk %d (payload bytes from %d): "+format, append([]any{c.n + 1, c.off}, args...)...)
}
