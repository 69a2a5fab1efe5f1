package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/lockd/lockd/lockstate"
)

// envelope wraps a bare entry as Encode does.
func envelope(bare []byte) []byte {
	b := binary.BigEndian.AppendUint32([]byte{byte(ChecksummedType)}, crc32.Checksum(bare, crc32.MakeTable(crc32.Castagnoli)))
	return append(b, bare...)
}

// TestEnvelopeBytes pins the entry format byte for byte: the envelope's
// type, the CRC-32C of the inner entry, big endian, and the inner entry
// exactly as builds before the envelope wrote it.
func TestEnvelopeBytes(t *testing.T) {
	// The algorithm: CRC-32C's check value, from the CRC catalogue.
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xe3069283 {
		t.Fatalf("CRC-32C check value %08x, want e3069283", got)
	}
	b, err := Encode(5, &lockstate.Release{Session: 7, Name: "db"})
	if err != nil {
		t.Fatal(err)
	}
	const want = "7f" + "df4151b8" + // envelope, CRC-32C of the rest
		"05" + "92" + "05" + // release, [ now=5,
		"82" + "a7" + "73657373696f6e" + "07" + "a4" + "6e616d65" + "a2" + "6462" // {"session": 7, "name": "db"}]
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("entry\n%s\nwant\n%s", got, want)
	}
}

// TestDecodeBareEntries: an entry as builds before the envelope wrote it
// (the inner entry alone, no checksum) decodes to the same command.
func TestDecodeBareEntries(t *testing.T) {
	for _, cmd := range sampleCommands() {
		b, err := Encode(42, cmd)
		if err != nil {
			t.Fatal(err)
		}
		now, got, err := Decode(b[envelopeHead:])
		if err != nil || now != 42 || !reflect.DeepEqual(got, cmd) {
			t.Fatalf("bare %T: %d %#v %v", cmd, now, got, err)
		}
	}
}

// TestDecodeChecksum changes every byte of checksummed entries, one at a
// time, to every other value: each change after the type byte must fail
// with ErrChecksum (CRC-32C catches every error confined to 32 bits), and
// one in the type byte must fail or decode to the very same command.
func TestDecodeChecksum(t *testing.T) {
	for _, cmd := range sampleCommands() {
		good, err := Encode(1_700_000_000_000_000_000, cmd)
		if err != nil {
			t.Fatal(err)
		}
		for i := range good {
			for x := 1; x < 256; x++ {
				b := bytes.Clone(good)
				b[i] ^= byte(x)
				now, got, err := Decode(b)
				switch {
				case i == 0 && err == nil && (now != 1_700_000_000_000_000_000 || !reflect.DeepEqual(got, cmd)):
					t.Fatalf("%T: type byte %02x decodes to %d %#v", cmd, b[0], now, got)
				case i > 0 && !errors.Is(err, ErrChecksum):
					t.Fatalf("%T: byte %d ^ %02x: %v, want ErrChecksum", cmd, i, x, err)
				case err != nil && !errors.Is(err, ErrMalformed) && !errors.As(err, new(*UnknownTypeError)):
					t.Fatalf("%T: byte %d ^ %02x: %v wraps neither ErrMalformed nor an unknown type", cmd, i, x, err)
				}
			}
		}
	}
}

func TestDecodeEnvelopeRejects(t *testing.T) {
	tick, err := Encode(1, &lockstate.Tick{})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		b        []byte
		checksum bool // the error must wrap ErrChecksum
	}{
		"type only":         {[]byte{byte(ChecksummedType)}, true},
		"no inner entry":    {tick[:envelopeHead], true},
		"cut short":         {tick[:len(tick)-1], true},
		"trailing byte":     {append(bytes.Clone(tick), 0), true},
		"envelope in one":   {envelope(tick), false},
		"empty, checksum 0": {[]byte{byte(ChecksummedType), 0, 0, 0, 0}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now, cmd, err := Decode(tc.b)
			if err == nil {
				t.Fatalf("decoded %d %#v", now, cmd)
			}
			if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrChecksum) != tc.checksum {
				t.Fatalf("error %v: ErrMalformed %t, ErrChecksum %t", err, errors.Is(err, ErrMalformed), errors.Is(err, ErrChecksum))
			}
		})
	}
	// The envelope's type with IgnoreUnknownFlag is the envelope, as for a
	// command this build knows: a flipped top bit must not make it
	// skippable.
	flagged := bytes.Clone(tick)
	flagged[0] |= byte(IgnoreUnknownFlag)
	if _, cmd, err := Decode(flagged); err != nil || !reflect.DeepEqual(cmd, &lockstate.Tick{}) {
		t.Fatalf("flagged envelope: %#v %v", cmd, err)
	}
}

// TestEnvelopeIsNoCommand: the envelope's type has no registry row, so no
// command can ever be encoded with it.
func TestEnvelopeIsNoCommand(t *testing.T) {
	if c := commandTypes[ChecksummedType]; c.typ != nil || c.decode != nil {
		t.Fatalf("ChecksummedType has a registry row: %s", c.name)
	}
}

// EncodeFormat writes what a voter of that format applies: the bare
// command for FormatBare (what builds before the envelope wrote and read),
// the checksummed envelope around the same bytes for FormatChecksummed.
func TestEncodeFormat(t *testing.T) {
	cmd := &lockstate.Acquire{Session: 7, Locks: []lockstate.LockSpec{{Name: "a/b", Mode: lockstate.Read}}}
	bare, err := EncodeFormat(FormatBare, 42, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if MessageType(bare[0]) != AcquireType {
		t.Fatalf("bare entry starts with %v, want the command's type", MessageType(bare[0]))
	}
	sealed, err := EncodeFormat(FormatChecksummed, 42, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if MessageType(sealed[0]) != ChecksummedType || !bytes.Equal(sealed[envelopeHead:], bare) {
		t.Fatalf("checksummed entry %x is not the envelope around %x", sealed, bare)
	}
	for _, b := range [][]byte{bare, sealed} {
		now, got, err := Decode(b)
		if err != nil || now != 42 || got.(*lockstate.Acquire).Locks[0].Name != "a/b" {
			t.Fatalf("decode %x: %d %+v %v", b, now, got, err)
		}
	}
	if newest, _ := Encode(42, cmd); !bytes.Equal(newest, sealed) {
		t.Fatal("Encode does not write NewestFormat")
	}
}
