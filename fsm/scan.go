package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// A snapshot record longer than the restore's read buffer is read whole
// before it is decoded (see recordReader), because the decoders check
// each length a value declares against the bytes in hand, and those must
// be all of the record. Reading it must not trust those lengths either:
// readValue below allocates only for bytes that arrive. (This package no
// longer reads anything with msgpack's own decoder, which is worse:
// v5.4.0 and v5.4.1 size slices from the length a value declares, without
// their documented limit (vmihailenco/msgpack#401: `flags&
// disableAllocLimitFlag != 1` is always true), so five bytes declaring a
// 4-billion-element array make it allocate hundreds of gigabytes.)

// maxDepth bounds nesting. Commands and snapshot records nest at most four
// deep; the bound keeps a hostile input from exhausting the stack.
const maxDepth = 16

var errTooDeep = errors.New("msgpack value nested too deep")

// valueHead describes a msgpack value from its first byte.
type valueHead struct {
	lenBytes int // big-endian length bytes after the code; 0: size is fixed
	size     int // payload bytes (elems == 0) or elements, when lenBytes == 0
	extra    int // payload bytes the length does not count (an ext's type byte)
	elems    int // values per element: 0 for raw bytes, 1 for an array, 2 for a map
}

// headOf returns the head for the code c, or false for the one code
// msgpack never uses (0xc1).
func headOf(c byte) (valueHead, bool) {
	switch {
	case c <= 0x7f || c >= 0xe0: // fixint
		return valueHead{}, true
	case c <= 0x8f: // fixmap
		return valueHead{size: int(c & 0x0f), elems: 2}, true
	case c <= 0x9f: // fixarray
		return valueHead{size: int(c & 0x0f), elems: 1}, true
	case c <= 0xbf: // fixstr
		return valueHead{size: int(c & 0x1f)}, true
	}
	switch c {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
		return valueHead{}, true
	case 0xc4, 0xd9: // bin8, str8
		return valueHead{lenBytes: 1}, true
	case 0xc5, 0xda: // bin16, str16
		return valueHead{lenBytes: 2}, true
	case 0xc6, 0xdb: // bin32, str32
		return valueHead{lenBytes: 4}, true
	case 0xc7, 0xc8, 0xc9: // ext8, ext16, ext32
		return valueHead{lenBytes: 1 << (c - 0xc7), extra: 1}, true
	case 0xcc, 0xd0: // uint8, int8
		return valueHead{size: 1}, true
	case 0xcd, 0xd1: // uint16, int16
		return valueHead{size: 2}, true
	case 0xca, 0xce, 0xd2: // float32, uint32, int32
		return valueHead{size: 4}, true
	case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
		return valueHead{size: 8}, true
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext1..16: type byte + 2^k bytes
		return valueHead{size: 1 + 1<<(c-0xd4)}, true
	case 0xdc: // array16
		return valueHead{lenBytes: 2, elems: 1}, true
	case 0xdd: // array32
		return valueHead{lenBytes: 4, elems: 1}, true
	case 0xde: // map16
		return valueHead{lenBytes: 2, elems: 2}, true
	case 0xdf: // map32
		return valueHead{lenBytes: 4, elems: 2}, true
	}
	return valueHead{}, false
}

func bigEndian(b []byte) int {
	n := 0
	for _, c := range b {
		n = n<<8 | int(c)
	}
	return n
}

// readValue appends the next complete msgpack value from r to buf. It
// allocates only for bytes that actually arrive, so a length that runs
// past the end of the stream fails with io.ErrUnexpectedEOF instead of
// reserving memory for it. A clean end before the value's first byte
// returns io.EOF.
func readValue(r *bufio.Reader, buf []byte, depth int) ([]byte, error) {
	c, err := r.ReadByte()
	if err != nil {
		return buf, err
	}
	buf = append(buf, c)
	h, ok := headOf(c)
	if !ok {
		return buf, fmt.Errorf("invalid msgpack code 0x%02x", c)
	}
	size := h.size
	if h.lenBytes > 0 {
		start := len(buf)
		if buf, err = appendN(r, buf, h.lenBytes); err != nil {
			return buf, err
		}
		size = bigEndian(buf[start:])
	}
	if h.elems == 0 {
		return appendN(r, buf, size+h.extra)
	}
	if depth == 0 {
		return buf, errTooDeep
	}
	for range size * h.elems {
		if buf, err = readValue(r, buf, depth-1); err != nil {
			return buf, noEOF(err)
		}
	}
	return buf, nil
}

// appendN appends exactly n bytes from r to buf, growing buf only as data
// arrives.
func appendN(r *bufio.Reader, buf []byte, n int) ([]byte, error) {
	const chunk = 64 << 10
	for n > 0 {
		k := min(n, chunk)
		start := len(buf)
		buf = append(buf, make([]byte, k)...)
		if _, err := io.ReadFull(r, buf[start:]); err != nil {
			return buf[:start], noEOF(err)
		}
		n -= k
	}
	return buf, nil
}

// noEOF turns a clean EOF into io.ErrUnexpectedEOF: a stream that stops
// inside a value, or before its end marker, is truncated, not finished.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
