package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/lockd/lockd/lockstate"
)

// framed is a format 2 stream taken apart, each chunk checked.
type framed struct {
	hdr     snapshotHeader
	head    []byte // the header record
	payload []byte // the chunks' payloads, joined
	chunks  []int  // payload offset of each chunk's start
}

// unframe takes a format 2, 3 or 4 stream apart, checking every chunk's length and
// checksum on its own terms (not with chunkReader).
func unframe(t testing.TB, b []byte) framed {
	t.Helper()
	hdr, head, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(b)))
	if err != nil || hdr.Format < snapshotFormat2 || hdr.Format > SnapshotFormat {
		t.Fatalf("header: format %d, %v", hdr.Format, err)
	}
	f := framed{hdr: hdr, head: head}
	crc := crc32.Checksum(head, crc32.MakeTable(crc32.Castagnoli))
	for rest := b[len(head):]; len(rest) > 0; {
		if len(rest) < 8 {
			t.Fatalf("chunk %d: %d bytes left for its head", len(f.chunks)+1, len(rest))
		}
		n, sum := int(binary.BigEndian.Uint32(rest)), binary.BigEndian.Uint32(rest[4:])
		if n == 0 || n > chunkSize || n > len(rest)-8 {
			t.Fatalf("chunk %d: length %d, %d bytes left", len(f.chunks)+1, n, len(rest)-8)
		}
		crc = crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), rest[8:8+n])
		if crc != sum {
			t.Fatalf("chunk %d: CRC-32C %08x, written as %08x", len(f.chunks)+1, crc, sum)
		}
		f.chunks = append(f.chunks, len(f.payload))
		f.payload = append(f.payload, rest[8:8+n]...)
		rest = rest[8+n:]
	}
	return f
}

// frame builds a format 2 stream from a header record and a payload cut
// into chunks of at most size bytes, all with good checksums.
func frame(t testing.TB, head, payload []byte, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.Write(head)
	cw := &chunkWriter{w: &buf, crc: crc32.Checksum(head, castagnoli)}
	for len(payload) > 0 {
		n := min(size, len(payload))
		if err := cw.chunk(payload[:n]); err != nil {
			t.Fatal(err)
		}
		payload = payload[n:]
	}
	return buf.Bytes()
}

// recordSpan is where one record lies in a payload.
type recordSpan struct {
	typ        recordType
	start, end int
}

// records finds the records of a format 2 (or later) payload, the trailer
// last (as part of the end record), decoding each with its kind's decoder.
func records(t testing.TB, payload []byte) []recordSpan {
	t.Helper()
	r := &mpReader{b: payload}
	var spans []recordSpan
	for r.pos < len(payload) {
		start := r.pos
		tag, err := r.uint()
		if err != nil {
			t.Fatalf("tag at %d: %v", start, err)
		}
		typ := recordType(tag)
		switch k := kindOf(typ); {
		case typ == recEnd:
			err = decodeSnapshotTrailer(r, new(snapshotTrailer))
		case k != nil:
			err = k.reader(false).decode(r)
		default:
			t.Fatalf("record at %d: tag %d", start, tag)
		}
		if err != nil {
			t.Fatalf("%v record at %d: %v", typ, start, err)
		}
		spans = append(spans, recordSpan{typ, start, r.pos})
	}
	return spans
}

// legacySnapshot turns a format 2 stream into the format 1 stream of the
// same records, as builds before checksums wrote it.
func legacySnapshot(t testing.TB, b []byte) []byte {
	t.Helper()
	f := unframe(t, b)
	spans := records(t, f.payload)
	end := spans[len(spans)-1]
	if end.typ != recEnd {
		t.Fatalf("last record is a %v", end.typ)
	}
	hdr := f.hdr
	hdr.Format = snapshotFormat1
	out := appendSnapshotHeader(appendTag(nil, recHeader), &hdr)
	out = append(out, f.payload[:end.start]...)
	return appendTag(out, recEnd)
}

// bigState returns a driver whose table spans several chunks: sessions
// holding many locks, and a node with so many holders that its record is
// split over chunks.
func bigState(t testing.TB) *driver {
	t.Helper()
	d := newDriver(t)
	var sessions []lockstate.SessionID
	for range 20 {
		sessions = append(sessions, d.session())
	}
	for i := range 4000 {
		s := sessions[i%len(sessions)]
		d.must(&lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock(fmt.Sprintf("big/%05d", i), lockstate.Write)}})
	}
	for range 3000 { // one node, 3000 readers: a record of about 150 kB
		s := d.session()
		d.must(&lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock("shared", lockstate.Read)}})
	}
	return d
}

// TestSnapshotFormat2 checks the stream Persist writes against the format
// described at SnapshotFormat, with a reader of its own (unframe): the
// header record as format 1 writes it, chunks with chained CRC-32Cs, each
// starting at a record unless it continues a record longer than a chunk,
// and a trailer that counts the records. Its records read as format 1
// restore the same state.
func TestSnapshotFormat2(t *testing.T) {
	d := bigState(t)
	b := snapshotBytes(t, d.f.FSM)
	f := unframe(t, b)
	wantHead := appendSnapshotHeader(appendTag(nil, recHeader), &snapshotHeader{Format: 2, Applied: d.index})
	if !bytes.Equal(f.head, wantHead) {
		t.Fatalf("header record %x, want %x", f.head, wantHead)
	}
	spans := records(t, f.payload)
	starts := map[int]bool{}
	for _, sp := range spans {
		starts[sp.start] = true
	}
	split := 0
	for i, off := range f.chunks {
		if !starts[off] {
			split++
			if off-f.chunks[i-1] != chunkSize {
				t.Errorf("chunk %d starts inside a record, after a chunk of %d bytes", i+1, off-f.chunks[i-1])
			}
		}
	}
	if len(f.chunks) < 8 || split < 2 {
		t.Fatalf("%d chunks, %d inside records: the test state is too small to test chunking", len(f.chunks), split)
	}
	var tr snapshotTrailer
	end := spans[len(spans)-1]
	if err := decodeSnapshotTrailer(&mpReader{b: f.payload[end.start+2:]}, &tr); err != nil || tr.Records != uint64(len(spans)) {
		t.Fatalf("trailer %+v (%v), want %d records before the end", tr, err, len(spans))
	}

	for _, stream := range [][]byte{b, legacySnapshot(t, b)} {
		again := newTestFSM(t)
		if err := restoreBytes(again.FSM, stream); err != nil {
			t.Fatal(err)
		}
		sameState(t, "restored", d.f.FSM, again.FSM)
	}
	t.Logf("%d bytes, %d records, %d chunks (%d inside a record)", len(b), len(spans)+1, len(f.chunks), split)
}

// TestRestoreDamagedChunk changes one byte in each chunk of a snapshot in
// turn, at random places: each restore must fail with ErrChecksum, name
// the first record of the damaged chunk and the remedy, and leave the FSM
// as it was.
func TestRestoreDamagedChunk(t *testing.T) {
	good := snapshotBytes(t, bigState(t).f.FSM)
	f := unframe(t, good)
	spans := records(t, f.payload)
	dst := newTestFSM(t)
	seedOther(t, dst)
	before, applied := dst.Digest(), dst.AppliedIndex()
	sub := dst.Subscribe(0)
	r := rand.New(rand.NewPCG(4, 4))
	for k, off := range f.chunks {
		size := len(f.payload) - off
		if k+1 < len(f.chunks) {
			size = f.chunks[k+1] - off
		}
		// The first record that reaches into the chunk, counting the header
		// as record 1.
		first := sort.Search(len(spans), func(i int) bool { return spans[i].end > off })
		b := bytes.Clone(good)
		pos := len(f.head) + 8*(k+1) + off + r.IntN(size) // chunk k's payload, past k+1 chunk heads
		b[pos] ^= byte(1 + r.IntN(255))
		err := restoreBytes(dst.FSM, b)
		if !errors.Is(err, ErrChecksum) {
			t.Fatalf("chunk %d, byte %d: %v, want ErrChecksum", k+1, pos, err)
		}
		// The record is named by its number, and by its type once its tag
		// was read.
		named := regexp.MustCompile(fmt.Sprintf(`record #%d( \(%v\))?: `, first+2, spans[first].typ))
		if !named.MatchString(err.Error()) {
			t.Fatalf("chunk %d: error does not name record #%d (%v):\n%v", k+1, first+2, spans[first].typ, err)
		}
		for _, want := range []string{fmt.Sprintf("chunk %d (payload bytes from %d): fails its checksum", k+1, off), "move its data dir away"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("chunk %d: error lacks %q:\n%v", k+1, want, err)
			}
		}
		if dst.Digest() != before || dst.AppliedIndex() != applied || sub.Err() != nil {
			t.Fatalf("chunk %d: the failed restore changed the FSM", k+1)
		}
	}
}

// TestRestoreRejectsChunks covers the framing of format 2: every case has
// good checksums, or none at all, and must fail for its own reason.
func TestRestoreRejectsChunks(t *testing.T) {
	good := snapshotBytes(t, richState(t).f.FSM)
	f := unframe(t, good)
	end := records(t, f.payload)
	last := end[len(end)-1]
	withTrailer := func(n uint64) []byte {
		return appendSnapshotTrailer(appendTag(bytes.Clone(f.payload[:last.start]), recEnd), &snapshotTrailer{Records: n})
	}
	// The same records in 100-byte chunks restore: the reader does not rely
	// on chunks starting at records.
	if err := restoreBytes(newTestFSM(t).FSM, frame(t, f.head, f.payload, 100)); err != nil {
		t.Fatalf("100-byte chunks: %v", err)
	}
	head2 := bytes.Clone(f.head)
	head2[len(head2)-1] ^= 1 // the applied index
	cases := map[string][]byte{
		"header only":        f.head,
		"chunk head cut":     good[:len(f.head)+5],
		"chunk cut":          good[:len(good)-1],
		"a chunk missing":    frame(t, f.head, f.payload[:last.start], chunkSize),
		"length 0":           append(bytes.Clone(good), 0, 0, 0, 0, 0, 0, 0, 0),
		"length too large":   append(binary.BigEndian.AppendUint32(bytes.Clone(f.head), chunkSize+1), good[len(f.head)+4:]...),
		"header changed":     append(head2, good[len(f.head):]...),
		"chunks swapped":     swapChunks(t, f),
		"trailer too low":    frame(t, f.head, withTrailer(uint64(len(end)-1)), chunkSize),
		"trailer too high":   frame(t, f.head, withTrailer(uint64(len(end)+1)), chunkSize),
		"no trailer":         frame(t, f.head, f.payload[:last.start+2], chunkSize),
		"payload after end":  frame(t, f.head, append(bytes.Clone(f.payload), 0xc0), chunkSize),
		"chunk after end":    frame(t, f.head, append(bytes.Clone(f.payload), 0xc0), len(f.payload)),
		"format 1 framing":   append(appendSnapshotHeader(appendTag(nil, recHeader), &snapshotHeader{Format: 1, Applied: f.hdr.Applied}), good[len(f.head):]...),
		"format 2, unframed": append(bytes.Clone(f.head), f.payload...),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			dst := newTestFSM(t)
			seedOther(t, dst)
			before := dst.Digest()
			err := restoreBytes(dst.FSM, b)
			if err == nil {
				t.Fatal("restore succeeded")
			}
			if !strings.HasPrefix(err.Error(), "fsm: restore: ") {
				t.Errorf("error %q", err)
			}
			if dst.Digest() != before || dst.AppliedIndex() != 3 {
				t.Fatal("failed restore changed the FSM")
			}
		})
	}
}

// swapChunks returns f's stream with its first two chunks swapped, each
// keeping its own checksum.
func swapChunks(t *testing.T, f framed) []byte {
	t.Helper()
	b := frame(t, f.head, f.payload, 200)
	first := b[len(f.head) : len(f.head)+208]
	second := b[len(f.head)+208 : len(f.head)+416]
	out := append(bytes.Clone(f.head), second...)
	out = append(out, first...)
	return append(out, b[len(f.head)+416:]...)
}
