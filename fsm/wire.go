package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
)

// mpReader decodes the msgpack that Encode writes, straight from the entry
// bytes. Apply decodes every committed entry, and the reflection-driven
// msgpack decoder cost as much per entry as lockstate itself; this reader
// does the same work without reflection and with no allocation beyond the
// command. It is deliberately narrower than msgpack: integers only from
// integer codes and in range, strings only from str codes, structs only
// from maps with string keys, no repeated keys. Every length is checked
// against the bytes left before anything is allocated for it. Restore
// reads snapshot records with it too, for the same reasons. The decoders
// of commands and records that drive it, and the encoders of records, are
// generated from the types' msgpack tags (codec_gen.go, see
// internal/codecgen).
type mpReader struct {
	b   []byte
	pos int // read position; an index rather than reslicing b, which costs a write barrier per byte while the GC runs
}

// left returns the unread bytes.
func (r *mpReader) left() []byte { return r.b[r.pos:] }

var errRange = errors.New("integer out of range")

func (r *mpReader) next() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, io.ErrUnexpectedEOF
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *mpReader) take(n int) ([]byte, error) {
	if n > len(r.b)-r.pos {
		return nil, io.ErrUnexpectedEOF
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

// bigEndian reads an n-byte big-endian unsigned integer.
func (r *mpReader) bigEndian(n int) (uint64, error) {
	b, err := r.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// count reads a 16- or 32-bit element count and checks that that many
// values of at least per bytes each can still follow.
func (r *mpReader) count(lenBytes, minSize int) (int, error) {
	v, err := r.bigEndian(lenBytes)
	if err != nil {
		return 0, err
	}
	if v > uint64((len(r.b)-r.pos)/minSize) {
		return 0, io.ErrUnexpectedEOF
	}
	return int(v), nil
}

// arrayLen reads an array header; nil reads as -1.
func (r *mpReader) arrayLen() (int, error) {
	c, err := r.next()
	switch {
	case err != nil:
		return 0, err
	case c == 0xc0:
		return -1, nil
	case c >= 0x90 && c <= 0x9f:
		if n := int(c & 0x0f); n <= len(r.b)-r.pos {
			return n, nil
		}
		return 0, io.ErrUnexpectedEOF
	case c == 0xdc:
		return r.count(2, 1)
	case c == 0xdd:
		return r.count(4, 1)
	}
	return 0, fmt.Errorf("want an array, got code 0x%02x", c)
}

func (r *mpReader) mapLen() (int, error) {
	c, err := r.next()
	switch {
	case err != nil:
		return 0, err
	case c >= 0x80 && c <= 0x8f:
		if n := int(c & 0x0f); 2*n <= len(r.b)-r.pos {
			return n, nil
		}
		return 0, io.ErrUnexpectedEOF
	case c == 0xde:
		return r.count(2, 2)
	case c == 0xdf:
		return r.count(4, 2)
	}
	return 0, fmt.Errorf("want a map, got code 0x%02x", c)
}

// strBytes reads a string's bytes, aliasing the input.
func (r *mpReader) strBytes() ([]byte, error) {
	c, err := r.next()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9:
		n, err = r.bigEndian(1)
	case c == 0xda:
		n, err = r.bigEndian(2)
	case c == 0xdb:
		n, err = r.bigEndian(4)
	default:
		return nil, fmt.Errorf("want a string, got code 0x%02x", c)
	}
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.b)-r.pos) {
		return nil, io.ErrUnexpectedEOF
	}
	return r.take(int(n))
}

// int reads any msgpack integer that fits in an int64.
func (r *mpReader) int() (int64, error) {
	c, err := r.next()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c >= 0xcc && c <= 0xcf: // uint8..uint64
		v, err := r.bigEndian(1 << (c - 0xcc))
		if err == nil && v > math.MaxInt64 {
			err = errRange
		}
		return int64(v), err
	case c >= 0xd0 && c <= 0xd3: // int8..int64
		n := 1 << (c - 0xd0)
		v, err := r.bigEndian(n)
		shift := 64 - 8*n
		return int64(v<<shift) >> shift, err // sign-extend
	}
	return 0, fmt.Errorf("want an integer, got code 0x%02x", c)
}

// uint reads any msgpack integer that is not negative.
func (r *mpReader) uint() (uint64, error) {
	if r.pos < len(r.b) && r.b[r.pos] == 0xcf { // uint64: the one code an int64 cannot carry
		r.pos++
		return r.bigEndian(8)
	}
	v, err := r.int()
	if err == nil && v < 0 {
		err = errRange
	}
	return uint64(v), err
}

func (r *mpReader) bool() (bool, error) {
	c, err := r.next()
	switch {
	case err != nil:
		return false, err
	case c == 0xc2:
		return false, nil
	case c == 0xc3:
		return true, nil
	}
	return false, fmt.Errorf("want a bool, got code 0x%02x", c)
}

func readInt[T ~int | ~int8 | ~int16 | ~int32 | ~int64](r *mpReader, p *T) error {
	v, err := r.int()
	if err != nil {
		return err
	}
	if int64(T(v)) != v {
		return errRange
	}
	*p = T(v)
	return nil
}

func readUint[T ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64](r *mpReader, p *T) error {
	v, err := r.uint()
	if err != nil {
		return err
	}
	if uint64(T(v)) != v {
		return errRange
	}
	*p = T(v)
	return nil
}

func readString[T ~string](r *mpReader, p *T) error {
	b, err := r.strBytes()
	if err != nil {
		return err
	}
	*p = T(b)
	return nil
}

func readBool(r *mpReader, p *bool) error {
	v, err := r.bool()
	*p = v
	return err
}

// readFields reads a struct's map, of at most n (≤ 32) fields, each at
// most once and those in required exactly once. field decodes the value
// of key and returns the field's bit, 0 for a key it does not know;
// tracking bits finds a repeated key without comparing keys. The generated
// decoders (codec_gen.go) call it: a command's with no field required
// (commands leave empty fields out, and older entries lack newer ones), a
// snapshot record's with every field but its omitempty ones, since records
// are written whole and a missing field is as corrupt as an unknown one.
func (r *mpReader) readFields(n int, required uint32, field func(key []byte) (bit uint32, err error)) error {
	m, err := r.mapLen()
	if err != nil {
		return err
	}
	if m > n || m < bits.OnesCount32(required) {
		return fmt.Errorf("map has %d entries for %d fields", m, n)
	}
	var seen uint32
	for range m {
		k, err := r.strBytes()
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		bit, err := field(k)
		switch {
		case err != nil:
			return fmt.Errorf("field %q: %w", k, err)
		case bit == 0:
			return fmt.Errorf("unknown field %q", k)
		case seen&bit != 0:
			return fmt.Errorf("field %q twice", k)
		}
		seen |= bit
	}
	if missing := required &^ seen; missing != 0 {
		return fmt.Errorf("field #%d of %d missing", bits.TrailingZeros32(missing)+1, n)
	}
	return nil
}

// readPtr reads a struct behind a pointer with dec; nil reads as a nil
// pointer.
func readPtr[T any](r *mpReader, p **T, dec func(*mpReader, *T) error) error {
	if r.pos < len(r.b) && r.b[r.pos] == 0xc0 {
		r.pos++
		*p = nil
		return nil
	}
	v := new(T)
	*p = v
	return dec(r, v)
}

// readList reads an array (nil gives a nil slice, [] an empty one, as
// msgpack's own decoder does) with elem decoding each element in place.
// Elements take at least minSize bytes each, which bounds what it
// allocates by the bytes actually left. It reuses *p's array when that is
// large enough (nil, as for a new record or command, never is), zeroed,
// for callers whose consumer copies the elements out.
func readList[T any](r *mpReader, p *[]T, minSize int, elem func(*T) error) error {
	c, err := r.next()
	if err != nil {
		return err
	}
	var n uint64
	switch {
	case c == 0xc0:
		*p = nil
		return nil
	case c >= 0x90 && c <= 0x9f:
		n = uint64(c & 0x0f)
	case c == 0xdc:
		n, err = r.bigEndian(2)
	case c == 0xdd:
		n, err = r.bigEndian(4)
	default:
		return fmt.Errorf("want an array, got code 0x%02x", c)
	}
	if err != nil {
		return err
	}
	if n > uint64((len(r.b)-r.pos)/minSize) {
		return io.ErrUnexpectedEOF
	}
	s := *p
	if uint64(cap(s)) < n || s == nil {
		s = make([]T, n)
	}
	s = s[:n]
	clear(s) // a reused element must not keep a field its new map leaves out (omitempty)
	for i := range s {
		if err := elem(&s[i]); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	*p = s
	return nil
}

// The append functions below write msgpack exactly as the library's
// encoder does with UseCompactInts, so that a snapshot written by the
// generated encoders is byte for byte the one msgpack would write
// (TestRecordCodec checks).

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32: // negative fixint
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// appendHead appends a map (fix 0x80, base 0xde) or array (fix 0x90, base
// 0xdc) header for n entries.
func appendHead(b []byte, fix, base byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, base), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, base+1), uint32(n))
}

func appendMapLen(b []byte, n int) []byte { return appendHead(b, 0x80, 0xde, n) }

func appendArrayLen(b []byte, n int) []byte { return appendHead(b, 0x90, 0xdc, n) }
