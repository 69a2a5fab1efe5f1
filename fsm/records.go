package fsm

import (
	"fmt"
	"reflect"

	"github.com/lockd/lockd/lockstate"
)

//go:generate go run ./internal/cmd/codecgen -o codec_gen.go

// recordType tags each record in a snapshot stream. Values are stored in
// snapshots: never reuse or renumber one. Tags are not in stream order:
// recordKinds is.
type recordType uint8

const (
	recHeader  recordType = 1 // snapshotHeader, the stream's own
	recTable   recordType = 2
	recSession recordType = 3
	recNode    recordType = 4
	recRequest recordType = 5
	recEnd     recordType = 6 // the end: no body in format 1, the snapshotTrailer since; nothing may follow
	// Since format 3:
	recSessionExtra recordType = 7
	recACL          recordType = 8
	recToken        recordType = 9
	// Since format 5:
	recDeniedCert recordType = 10
)

// recordKinds is the registry of snapshot records, and the only list of
// them: one row per kind of lockstate.Record, in the order the stream
// carries them (Export's), each with its tag, its name, the oldest snapshot
// format that carries it and its encoder and decoder (generated from its
// msgpack tags into codec_gen.go). What a record does to the table and to
// the digest its own type says (lockstate.Record). Snapshot, Persist (the
// format it chooses, the records and the trailer's count) and Restore (the
// tags it accepts in a format, their order, the decoders and the loader)
// all go by this list; the stream's framing, the header record before the
// kinds and the end after them, is snapshot.go's. docs/architecture.md
// ("Adding a snapshot record kind") walks through adding one;
// TestRecordRegistryComplete fails for a kind that misses a part.
var recordKinds = []recordKind{
	record(recTable, "table header", snapshotFormat1, appendHeader, decodeHeader).once(),
	record(recSession, "session", snapshotFormat1, appendSessionRecord, decodeSessionRecord),
	record(recNode, "node", snapshotFormat1, appendNodeRecord, decodeNodeRecord).reusing().formatOf(nodeFormat),
	record(recRequest, "request", snapshotFormat1, appendRequestRecord, decodeRequestRecord).formatOf(requestFormat),
	record(recSessionExtra, "session extra", snapshotFormat3, appendSessionExtraRecord, decodeSessionExtraRecord),
	record(recACL, "acl", snapshotFormat3, appendACLRecord, decodeACLRecord).once(),
	record(recToken, "token", snapshotFormat3, appendTokenRecord, decodeTokenRecord).formatOf(tokenFormat),
	record(recDeniedCert, "denied certificate", snapshotFormat5, appendDeniedCertRecord, decodeDeniedCertRecord),
}

// tokenFormat: a token with limits of its own needs format 4.
func tokenFormat(rec lockstate.Record) int {
	if rec.(*lockstate.TokenRecord).Limits != nil {
		return snapshotFormat4
	}
	return snapshotFormat3
}

// nodeFormat: a node one of whose holds has a value needs format 7.
func nodeFormat(rec lockstate.Record) int {
	for _, h := range rec.(*lockstate.NodeRecord).Holds {
		if h.Value != "" {
			return snapshotFormatHoldValues
		}
	}
	return snapshotFormat1
}

// requestFormat: a request one of whose locks has a value needs format 7.
func requestFormat(rec lockstate.Record) int {
	for _, sp := range rec.(*lockstate.RequestRecord).Locks {
		if sp.Value != "" {
			return snapshotFormatHoldValues
		}
	}
	return snapshotFormat1
}

// recordKind is one row of the record registry.
type recordKind struct {
	tag   recordType
	name  string
	since int          // the oldest snapshot format that carries the kind
	typ   reflect.Type // the record's Go type, a pointer
	// single: at most one record of the kind in a stream.
	single bool
	// reuse: a restore decodes each record of the kind over the one
	// before, reusing its slices' arrays, which saves an allocation a
	// record; for a kind whose load copies its slices out and whose
	// fields are all written (and so all decoded) every time (the
	// elements of a reused slice are zeroed first: see readList).
	reuse  bool
	put    func(b []byte, rec lockstate.Record) []byte // appends rec's body
	format func(rec lockstate.Record) int              // the format rec needs; nil: since
	reader func(reuse bool) kindReader
}

// record makes the registry row of the record type *T from its encoder
// and decoder.
func record[T any, P interface {
	*T
	lockstate.Record
}](tag recordType, name string, since int, put func([]byte, P) []byte, decode func(*mpReader, P) error) recordKind {
	return recordKind{tag: tag, name: name, since: since, typ: reflect.TypeFor[P](),
		put:    func(b []byte, rec lockstate.Record) []byte { return put(b, rec.(P)) },
		reader: func(reuse bool) kindReader { return &kindReaderOf[T, P]{dec: decode, reuse: reuse} },
	}
}

// once returns the row for a kind a stream holds at most one of.
func (k recordKind) once() recordKind {
	k.single = true
	return k
}

// reusing returns the row for a kind whose records a restore may decode
// over each other (see recordKind.reuse).
func (k recordKind) reusing() recordKind {
	k.reuse = true
	return k
}

// formatOf returns the row for a kind some of whose records need a later
// format than its own, as format says.
func (k recordKind) formatOf(format func(rec lockstate.Record) int) recordKind {
	k.format = format
	return k
}

// formatFor returns the oldest snapshot format that carries rec, of kind k.
func (k *recordKind) formatFor(rec lockstate.Record) int {
	if k.format != nil {
		return k.format(rec)
	}
	return k.since
}

// kindReader decodes a restore's records of one kind, each into the same
// record, which the loader does not keep.
type kindReader interface {
	decode(r *mpReader) error
	record() lockstate.Record // the record last decoded
}

type kindReaderOf[T any, P interface {
	*T
	lockstate.Record
}] struct {
	rec   T
	reuse bool
	dec   func(*mpReader, P) error
}

func (kr *kindReaderOf[T, P]) decode(r *mpReader) error {
	if !kr.reuse {
		var zero T
		kr.rec = zero
	}
	return kr.dec(r, &kr.rec)
}

func (kr *kindReaderOf[T, P]) record() lockstate.Record { return P(&kr.rec) }

// kindByTag maps a tag to its recordKinds index, -1 for a tag that is not
// a kind's.
var kindByTag = func() (m [256]int8) {
	for i := range m {
		m[i] = -1
	}
	for i, k := range recordKinds {
		m[k.tag] = int8(i)
	}
	return m
}()

// kindOf returns t's row, or nil if t is not a kind's tag.
func kindOf(t recordType) *recordKind {
	if i := kindByTag[t]; i >= 0 {
		return &recordKinds[i]
	}
	return nil
}

// nextKind returns the index of rec's kind in recordKinds, looking from
// index k on (records come in the registry's order), or len(recordKinds)
// if it is not there.
func nextKind(k int, rec lockstate.Record) int {
	for t := reflect.TypeOf(rec); k < len(recordKinds) && recordKinds[k].typ != t; k++ {
	}
	return k
}

// position is a record type's place in the stream: the header first, the
// kinds in their order, the end last; -1 for a tag of none of them.
func (t recordType) position() int {
	switch {
	case t == recHeader:
		return 0
	case t == recEnd:
		return len(recordKinds) + 1
	case kindByTag[t] >= 0:
		return int(kindByTag[t]) + 1
	}
	return -1
}

func (t recordType) String() string {
	switch k := kindOf(t); {
	case t == recHeader:
		return "header"
	case t == recEnd:
		return "end"
	case k != nil:
		return k.name
	}
	return fmt.Sprintf("record type %d", uint8(t))
}
