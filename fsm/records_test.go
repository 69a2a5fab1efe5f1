package fsm

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lockd/lockd/lockstate"
)

// codec is one type the snapshot stream carries, with its generated
// encoder and decoder.
type codec struct {
	typ    reflect.Type // a pointer type
	append func(b []byte, rec any) []byte
	decode func(r *mpReader, rec any) error
}

func codecOf[T any](app func([]byte, *T) []byte, dec func(*mpReader, *T) error) codec {
	return codec{
		typ:    reflect.TypeFor[*T](),
		append: func(b []byte, rec any) []byte { return app(b, rec.(*T)) },
		decode: func(r *mpReader, rec any) error { return dec(r, rec.(*T)) },
	}
}

// kindCodec is the codec of a kind of the record registry, through its
// row: the encoder and the decoder a snapshot and a restore use.
func kindCodec(k *recordKind) codec {
	return codec{
		typ:    k.typ,
		append: func(b []byte, rec any) []byte { return k.put(b, rec.(lockstate.Record)) },
		decode: func(r *mpReader, rec any) error {
			kr := k.reader(false)
			err := kr.decode(r)
			reflect.ValueOf(rec).Elem().Set(reflect.ValueOf(kr.record()).Elem())
			return err
		},
	}
}

// codecs lists every record of a snapshot: each kind of the registry, the
// stream's own header and trailer, and every struct nested in a kind.
var codecs = func() []codec {
	var cs []codec
	for i := range recordKinds {
		cs = append(cs, kindCodec(&recordKinds[i]))
	}
	return append(cs,
		codecOf(appendSnapshotHeader, decodeSnapshotHeader),
		codecOf(appendSnapshotTrailer, decodeSnapshotTrailer),
		codecOf(appendHoldRecord, decodeHoldRecord),
		codecOf(appendLockSpec, decodeLockSpec),
		codecOf(appendGrant, decodeGrant),
		codecOf(appendRevocation, decodeRevocation),
		codecOf(appendRule, decodeRule),
		codecOf(appendTokenLimits, decodeTokenLimits),
	)
}()

// codecIndex returns the codecs index of *T.
func codecIndex[T any]() int {
	for i, c := range codecs {
		if c.typ == reflect.TypeFor[*T]() {
			return i
		}
	}
	panic("no codec for " + reflect.TypeFor[T]().String())
}

// libEncode encodes v as the snapshot writer did before records were
// written by hand.
func libEncode(t testing.TB, v any, compact bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(compact)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// libDecodeRecord decodes b into a new value of k's type with msgpack's
// reflection decoder. Only give it bytes k.decode accepted (see scan.go).
func libDecodeRecord(t testing.TB, k codec, b []byte) any {
	t.Helper()
	v := reflect.New(k.typ.Elem()).Interface()
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("msgpack rejects what %v accepted: %v\n%x", k.typ, err, b)
	}
	return v
}

// decodeRecord decodes one value of k's type from the start of b and
// returns it with the bytes it took.
func decodeRecord(k codec, b []byte) (any, int, error) {
	v := reflect.New(k.typ.Elem()).Interface()
	r := mpReader{b: b}
	err := k.decode(&r, v)
	return v, r.pos, err
}

// checkRecord checks rec both ways against msgpack: the hand encoder writes
// what msgpack writes, and the decoder reads it, and msgpack's plain
// (non-compact) encoding, back into rec, as msgpack's decoder does.
func checkRecord(t *testing.T, k codec, rec any) {
	t.Helper()
	want := libEncode(t, rec, true)
	got := k.append(nil, rec)
	if !bytes.Equal(got, want) {
		t.Fatalf("%v: encoding differs from msgpack's:\n got %x\nwant %x\n%+v", k.typ, got, want, rec)
	}
	for _, b := range [][]byte{got, libEncode(t, rec, false)} {
		dec, n, err := decodeRecord(k, b)
		if err != nil {
			t.Fatalf("%v: decode: %v\n%x\n%+v", k.typ, err, b, rec)
		}
		if n != len(b) {
			t.Fatalf("%v: decode took %d of %d bytes", k.typ, n, len(b))
		}
		if !reflect.DeepEqual(dec, rec) {
			t.Fatalf("%v: round trip:\n got %+v\nwant %+v", k.typ, dec, rec)
		}
		if lib := libDecodeRecord(t, k, b); !reflect.DeepEqual(lib, dec) {
			t.Fatalf("%v: msgpack decodes %+v, we decode %+v", k.typ, lib, dec)
		}
	}
}

// TestRecordCodec cross-checks the generated record encoders and decoders
// against msgpack's reflection codec: with every field set (codec_gen.go
// must have been generated from the types as they are), and on random
// records whose values cross every size boundary of the format.
func TestRecordCodec(t *testing.T) {
	for _, k := range codecs {
		v := reflect.New(k.typ).Elem()
		fill(v, 1)
		checkRecord(t, k, v.Interface())
	}
	n := 3000
	if testing.Short() || raceEnabled {
		n = 300
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		k := codecs[i%len(codecs)]
		v := reflect.New(k.typ).Elem()
		randFill(v, r)
		checkRecord(t, k, v.Interface())
	}
	// Arrays of 2^16 elements or more, and strings as long, take the 32-bit
	// length forms.
	checkRecord(t, codecs[codecIndex[lockstate.SessionRecord]()], &lockstate.SessionRecord{ID: 1, Name: strings.Repeat("n", 1<<16), Done: make([]string, 1<<16)})
	checkRecord(t, codecs[codecIndex[lockstate.RequestRecord]()], &lockstate.RequestRecord{ID: "r", Upgrade: make([]bool, 70_000)})
}

var (
	intEdges = []int64{0, 1, -1, 31, -32, -33, 127, 128, -128, -129, 255, 256, math.MaxInt16, math.MaxInt16 + 1,
		math.MinInt16, math.MinInt16 - 1, math.MaxUint16, math.MaxUint16 + 1, math.MaxInt32, math.MaxInt32 + 1,
		math.MinInt32, math.MinInt32 - 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MinInt64}
	uintEdges = []uint64{0, 1, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32,
		math.MaxUint32 + 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}
	strLens = []int{0, 1, 31, 32, 255, 256, math.MaxUint16}
)

// randFill sets every field of v, recursively, to a random value, often
// one at the edge of a msgpack size class.
func randFill(v reflect.Value, r *rand.Rand) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		randFill(v.Elem(), r)
	case reflect.Struct:
		for i := range v.NumField() {
			randFill(v.Field(i), r)
		}
	case reflect.Slice:
		switch r.IntN(6) {
		case 0: // nil
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := 1 + r.IntN(20) // past 15, the last fixarray length
			v.Set(reflect.MakeSlice(v.Type(), n, n))
			for i := range n {
				randFill(v.Index(i), r)
			}
		}
	case reflect.String:
		n := r.IntN(40)
		if r.IntN(4) == 0 {
			n = strLens[r.IntN(len(strLens))]
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		v.SetString(string(b))
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 1)
	case reflect.Int, reflect.Int64:
		if r.IntN(2) == 0 {
			v.SetInt(intEdges[r.IntN(len(intEdges))])
		} else {
			v.SetInt(int64(r.Uint64()) >> r.IntN(64))
		}
	case reflect.Uint8:
		v.SetUint(uint64(r.IntN(256)))
	case reflect.Uint64:
		if r.IntN(2) == 0 {
			v.SetUint(uintEdges[r.IntN(len(uintEdges))])
		} else {
			v.SetUint(r.Uint64() >> r.IntN(64))
		}
	default:
		panic("randFill: add kind " + v.Kind().String())
	}
}

// TestDecodeNodeReusesHolds: a restore decodes a node over the one before
// (the registry row is reusing), and each takes its own holds only, in the
// array the one before had when it fits.
func TestDecodeNodeReusesHolds(t *testing.T) {
	hold := func(s lockstate.SessionID) lockstate.HoldRecord {
		return lockstate.HoldRecord{Session: s, Mode: lockstate.Read, Weight: 1, Count: 1, Token: uint64(s)}
	}
	k := kindOf(recNode)
	if !k.reuse {
		t.Fatal("node records are not decoded over each other")
	}
	kr := k.reader(k.reuse)
	var last *lockstate.HoldRecord
	for _, want := range []lockstate.NodeRecord{
		{Name: "a", Version: 1, Holds: []lockstate.HoldRecord{hold(1), hold(2), hold(3)}},
		{Name: "b", Version: 2, Limit: 3, Holds: []lockstate.HoldRecord{hold(4)}},
		{Name: "c", Holds: []lockstate.HoldRecord{}},
		{Name: "d", DelayUntil: -5},
		{Name: "e", Holds: []lockstate.HoldRecord{hold(5), hold(6), hold(7), hold(8)}},
	} {
		if err := kr.decode(&mpReader{b: appendNodeRecord(nil, &want)}); err != nil {
			t.Fatal(err)
		}
		n := kr.record().(*lockstate.NodeRecord)
		if !reflect.DeepEqual(*n, want) {
			t.Fatalf("got %+v, want %+v", n, want)
		}
		if want.Name == "b" && &n.Holds[0] != last {
			t.Fatal("node b's single hold is not in node a's array")
		}
		if len(n.Holds) > 0 {
			last = &n.Holds[0]
		}
	}
}

// TestReusingKindsDecodeWhole: a kind whose records a restore decodes over
// each other decodes every one as a new record would be, so that nothing
// of the one before stays (every field of theirs is written each time).
func TestReusingKindsDecodeWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for i := range recordKinds {
		k := &recordKinds[i]
		if !k.reuse {
			continue
		}
		c, kr := kindCodec(k), k.reader(true)
		for range 200 {
			v := reflect.New(k.typ.Elem())
			randFill(v.Elem(), r)
			b := c.append(nil, v.Interface())
			fresh, _, err := decodeRecord(c, b)
			if err != nil {
				t.Fatal(err)
			}
			if err := kr.decode(&mpReader{b: b}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(kr.record(), fresh) {
				t.Fatalf("%s decoded over another:\n%+v\nnew:\n%+v", k.name, kr.record(), fresh)
			}
		}
	}
}

// mp builds msgpack by hand for the strictness cases.
type mp []byte

func mpMap(kvs ...mp) mp {
	b := appendMapLen(nil, len(kvs)/2)
	for _, kv := range kvs {
		b = append(b, kv...)
	}
	return b
}

func mpArray(elems ...mp) mp {
	b := appendHead(nil, 0x90, 0xdc, len(elems))
	for _, e := range elems {
		b = append(b, e...)
	}
	return b
}

func mpStr(s string) mp  { return appendStr(nil, s) }
func mpUint(v uint64) mp { return appendUint(nil, v) }
func mpInt(v int64) mp   { return appendInt(nil, v) }

// TestRecordDecodeStrict covers what the record decoders refuse that
// msgpack's decoder would accept, coerce or try to allocate for.
func TestRecordDecodeStrict(t *testing.T) {
	hold := func(replace ...mp) mp {
		kv := []mp{mpStr("session"), mpUint(1), mpStr("mode"), mpUint(2), mpStr("weight"), mpUint(1),
			mpStr("count"), mpUint(1), mpStr("token"), mpUint(9), mpStr("expires"), mpUint(0), mpStr("granted"), mpUint(4)}
		for i := 0; i < len(replace); i += 2 {
			for j := 0; j < len(kv); j += 2 {
				if bytes.Equal(kv[j], replace[i]) {
					kv[j+1] = replace[i+1]
				}
			}
		}
		return mpMap(kv...)
	}
	node := func(holds mp) mp {
		return mpMap(mpStr("name"), mpStr("a"), mpStr("version"), mpUint(1), mpStr("limit"), mpUint(1),
			mpStr("delay_until"), mpUint(0), mpStr("holds"), holds)
	}
	nodeKind := codecs[codecIndex[lockstate.NodeRecord]()]
	if _, _, err := decodeRecord(nodeKind, node(mpArray(hold()))); err != nil {
		t.Fatalf("base case: %v", err)
	}
	cases := map[string]mp{
		"missing field": mpMap(mpStr("name"), mpStr("a"), mpStr("version"), mpUint(1), mpStr("limit"), mpUint(1),
			mpStr("holds"), mpArray()),
		"extra field": mpMap(mpStr("name"), mpStr("a"), mpStr("version"), mpUint(1), mpStr("limit"), mpUint(1),
			mpStr("delay_until"), mpUint(0), mpStr("holds"), mpArray(), mpStr("x"), mpUint(0)),
		"repeated field": mpMap(mpStr("name"), mpStr("a"), mpStr("version"), mpUint(1), mpStr("limit"), mpUint(1),
			mpStr("name"), mpStr("b"), mpStr("holds"), mpArray()),
		"unknown field":     mpMap(mpStr("name"), mpStr("a"), mpStr("version"), mpUint(1), mpStr("limit"), mpUint(1), mpStr("delay"), mpUint(0), mpStr("holds"), mpArray()),
		"mode over 255":     node(mpArray(hold(mpStr("mode"), mpUint(256)))),
		"negative session":  node(mpArray(hold(mpStr("session"), mpInt(-1)))),
		"count over int64":  node(mpArray(hold(mpStr("count"), mpUint(math.MaxUint64)))),
		"float token":       node(mpArray(hold(mpStr("token"), mp{0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}))),
		"nil token":         node(mpArray(hold(mpStr("token"), mp{0xc0}))),
		"hold nil":          node(mpArray(mp{0xc0})),
		"hold an array":     node(mpArray(mpArray())),
		"holds a map":       node(mpMap()),
		"holds past end":    node(mp{0xdd, 0xff, 0xff, 0xff, 0xff}),
		"holds short":       node(mp{0x92}), // two holds, each at least minHoldSize bytes, in fewer
		"name nil":          mpMap(mpStr("name"), mp{0xc0}, mpStr("version"), mpUint(1), mpStr("limit"), mpUint(1), mpStr("delay_until"), mpUint(0), mpStr("holds"), mpArray()),
		"name bin":          mpMap(mpStr("name"), mp{0xc4, 1, 'a'}, mpStr("version"), mpUint(1), mpStr("limit"), mpUint(1), mpStr("delay_until"), mpUint(0), mpStr("holds"), mpArray()),
		"name past end":     mp{0x85, 0xa4, 'n', 'a', 'm', 'e', 0xdb, 0xff, 0xff, 0xff, 0xff},
		"map32 past end":    mp{0xdf, 0xff, 0xff, 0xff, 0xff},
		"int key":           mpMap(mpUint(1), mpStr("a"), mpStr("version"), mpUint(1), mpStr("limit"), mpUint(1), mpStr("delay_until"), mpUint(0), mpStr("holds"), mpArray()),
		"not a map":         mpArray(),
		"never-used code":   mp{0xc1},
		"empty":             mp{},
		"truncated":         node(mpArray(hold()))[:20],
		"truncated in hold": node(mpArray(hold()))[:60],
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if v, _, err := decodeRecord(nodeKind, b); err == nil {
				t.Fatalf("decoded %+v", v)
			}
		})
	}
}
