package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/quorum"
)

// sampleCommands has one command of every type with every field set, so a
// field that does not survive the round trip shows up.
func sampleCommands() []lockstate.Command {
	return []lockstate.Command{
		&lockstate.CreateSession{Name: "worker-1", TTL: 10 * time.Second, OnDeadlock: lockstate.SurrenderLock,
			Ordered: true, LockDelay: 5 * time.Second},
		&lockstate.CloseSession{Session: 42},
		&lockstate.ExpireSession{Session: 1 << 40},
		&lockstate.Acquire{Session: 7, RequestID: "req-1", Require: quorum.Majority, Wait: time.Minute, HoldTTL: time.Hour,
			Locks: []lockstate.LockSpec{
				{Name: "db/orders", Mode: lockstate.Read},
				{Name: "db/orders/42", Mode: lockstate.Write, Weight: 3, Limit: 5},
				{Name: "jobs/é", Mode: lockstate.Write},
			}},
		&lockstate.Release{Session: 7, Name: "db/orders"},
		&lockstate.Release{Session: 7, RequestID: "req-1"},
		&lockstate.Surrender{Session: 7, Name: "db"},
		&lockstate.Cancel{Session: 7, RequestID: "req-1"},
		&lockstate.Cancel{RequestID: "req-2"},
		&lockstate.Tick{},
		// The fields and commands of FormatACL.
		&lockstate.CreateSession{Name: "w", TTL: time.Second, Key: "k0123456789abcdefghijK", Authority: lockstate.Authority{Auth: testTokenID},
			Limits: &lockstate.Limits{Sessions: 1, HoldsPerSession: 2, WaitersPerName: 3, Waiters: 4}},
		&lockstate.CloseSession{Session: 42, Authority: lockstate.Authority{Auth: testTokenID}},
		&lockstate.Acquire{Session: 7, RequestID: "req-3", Authority: lockstate.Authority{Auth: testTokenID}, Limits: &lockstate.Limits{Waiters: 9},
			Locks: []lockstate.LockSpec{{Name: "a", Mode: lockstate.Write}}},
		&lockstate.Release{Session: 7, Name: "a", Authority: lockstate.Authority{Auth: testTokenID}},
		&lockstate.Surrender{Session: 7, Name: "a", Authority: lockstate.Authority{Auth: testTokenID}},
		&lockstate.Cancel{Session: 7, RequestID: "req-3", Authority: lockstate.Authority{Auth: testTokenID}},
		&lockstate.Revoke{Name: "jobs/a", Authority: lockstate.Authority{Auth: testTokenID}},
		&lockstate.BootstrapACL{ID: testTokenID, Hash: testTokenHash},
		&lockstate.CreateToken{Authority: lockstate.Authority{Auth: testTokenID}, ID: testTokenID, Hash: testTokenHash, Name: "jobs",
			Rules: []lockstate.Rule{{Prefix: "jobs/", Access: lockstate.AccessWrite}, {Prefix: "", Access: lockstate.AccessRead}}},
		&lockstate.DeleteToken{Authority: lockstate.Authority{Auth: testTokenID}, ID: testTokenID},
		&lockstate.DenyCert{Authority: lockstate.Authority{Auth: testTokenID}, Serial: "7b2f01", Reason: "leaked from a build machine"},
		&lockstate.DenyCert{Serial: "1"},
		// FormatSessionRequestIDs.
		&lockstate.Acquire{Session: 7, RequestID: "req-4", SessionScoped: true, Authority: lockstate.Authority{Auth: testTokenID},
			Locks: []lockstate.LockSpec{{Name: "a", Mode: lockstate.Write}}},
		// FormatHoldValues.
		&lockstate.Acquire{Session: 7, RequestID: "req-5", Locks: []lockstate.LockSpec{{Name: "a", Mode: lockstate.Write},
			{Name: "svc/scheduler", Mode: lockstate.Write, Value: "10.0.0.7:8080"}}},
		&lockstate.Proclaim{Session: 7, Name: "svc/scheduler", Value: "10.0.0.7:9090", Token: 12, Authority: lockstate.Authority{Auth: testTokenID}},
		&lockstate.Proclaim{Session: 7, Name: "svc/scheduler"},
		// FormatExpireBatch.
		&lockstate.ExpireSessions{Sessions: []lockstate.SessionID{9, 1 << 40, 3}},
	}
}

const (
	testTokenID   = "0f0e0d0c-0b0a-4908-8706-050403020100"
	testTokenHash = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
)

// TestFormatGate: a command with ACL fields is not written in a format an
// older voter cannot apply; one without them is, byte for byte as before.
func TestFormatGate(t *testing.T) {
	for _, cmd := range sampleCommands() {
		_, errOld := EncodeFormat(FormatChecksummed, 1, cmd)
		f := max(FormatACL, MinFormat(cmd)) // a command or field that came later needs its own format
		_, errNew := EncodeFormat(f, 1, cmd)
		if errNew != nil {
			t.Fatalf("%T in format %d: %v", cmd, f, errNew)
		}
		if _, err := EncodeFormat(f-1, 1, cmd); f > FormatACL && !errors.Is(err, ErrFormatTooOld) {
			t.Errorf("%T in format %d, before its own: error %v, want ErrFormatTooOld", cmd, f-1, err)
		}
		if (errOld != nil) != needsACLFormat(cmd) {
			t.Errorf("%#v in FormatChecksummed: error %v, needs ACL format %v", cmd, errOld, needsACLFormat(cmd))
		}
	}
	if !needsACLFormat(&lockstate.Revoke{Name: "a"}) || needsACLFormat(&lockstate.Acquire{Session: 1}) {
		t.Fatal("needsACLFormat misjudges")
	}
}

// TestFormatGateSessionScoped: an acquire whose request id is scoped to
// its session is refused below FormatSessionRequestIDs (an older voter
// would apply it by the older rule); one without the flag is written in
// every format since FormatACL byte for byte as in FormatDenyCert.
func TestFormatGateSessionScoped(t *testing.T) {
	acq := func(scoped bool) *lockstate.Acquire {
		return &lockstate.Acquire{Session: 3, RequestID: "job", SessionScoped: scoped, Authority: lockstate.Authority{Auth: testTokenID},
			Locks: []lockstate.LockSpec{{Name: "jobs/a", Mode: lockstate.Write}}}
	}
	want, err := EncodeFormat(FormatDenyCert, 1, acq(false))
	if err != nil {
		t.Fatal(err)
	}
	for f := FormatACL; f <= NewestFormat; f++ {
		b, err := EncodeFormat(f, 1, acq(false))
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("unscoped in format %d: %x, %v; want %x", f, b, err, want)
		}
		_, err = EncodeFormat(f, 1, acq(true))
		if tooOld := f < FormatSessionRequestIDs; tooOld != errors.Is(err, ErrFormatTooOld) || !tooOld && err != nil {
			t.Errorf("scoped in format %d: %v", f, err)
		}
	}
	if MinFormat(acq(true)) != FormatSessionRequestIDs || MinFormat(acq(false)) != FormatACL {
		t.Errorf("MinFormat: scoped %d, unscoped %d", MinFormat(acq(true)), MinFormat(acq(false)))
	}
}

// TestFormatGateHoldValues: an acquire that gives a hold a value, and a
// proclaim, are refused below FormatHoldValues (an older voter would not
// apply them); an acquire without values is written in every format since
// FormatACL byte for byte as in FormatSessionRequestIDs.
func TestFormatGateHoldValues(t *testing.T) {
	acq := func(values ...string) *lockstate.Acquire {
		c := &lockstate.Acquire{Session: 3, RequestID: "job", Authority: lockstate.Authority{Auth: testTokenID}}
		for i, v := range values {
			c.Locks = append(c.Locks, lockstate.LockSpec{Name: fmt.Sprintf("svc/%d", i), Mode: lockstate.Write, Value: v})
		}
		return c
	}
	plain := acq("", "")
	want, err := EncodeFormat(FormatSessionRequestIDs, 1, plain)
	if err != nil {
		t.Fatal(err)
	}
	for f := FormatACL; f <= NewestFormat; f++ {
		if b, err := EncodeFormat(f, 1, plain); err != nil || !bytes.Equal(b, want) {
			t.Errorf("no values in format %d: %x, %v; want %x", f, b, err, want)
		}
		for _, cmd := range []lockstate.Command{acq("a"), acq("", "b"), &lockstate.Proclaim{Session: 3, Name: "svc/0"}} {
			_, err := EncodeFormat(f, 1, cmd)
			if tooOld := f < FormatHoldValues; tooOld != errors.Is(err, ErrFormatTooOld) || !tooOld && err != nil {
				t.Errorf("%#v in format %d: %v", cmd, f, err)
			}
		}
	}
	if MinFormat(acq("", "b")) != FormatHoldValues || MinFormat(plain) != FormatACL {
		t.Errorf("MinFormat: with a value %d, without %d", MinFormat(acq("", "b")), MinFormat(plain))
	}
}

// TestFormatGateExpireBatch: a batched expiry is refused below
// FormatExpireBatch (an older voter would stop on it), and a single
// session's expiry is written in every format as it always was.
func TestFormatGateExpireBatch(t *testing.T) {
	single := &lockstate.ExpireSession{Session: 12}
	want, err := EncodeFormat(FormatChecksummed, 1, single)
	if err != nil {
		t.Fatal(err)
	}
	batch := &lockstate.ExpireSessions{Sessions: []lockstate.SessionID{12, 13}}
	for f := FormatChecksummed; f <= NewestFormat; f++ {
		if b, err := EncodeFormat(f, 1, single); err != nil || !bytes.Equal(b, want) {
			t.Errorf("a single expiry in format %d: %x, %v; want %x", f, b, err, want)
		}
		_, err := EncodeFormat(f, 1, batch)
		if tooOld := f < FormatExpireBatch; tooOld != errors.Is(err, ErrFormatTooOld) || !tooOld && err != nil {
			t.Errorf("a batched expiry in format %d: %v", f, err)
		}
	}
}

// needsACLFormat reports whether cmd can only be written in FormatACL or
// later.
func needsACLFormat(cmd lockstate.Command) bool { return MinFormat(cmd) >= FormatACL }

func TestCodecRoundTrip(t *testing.T) {
	wantTypes := map[reflect.Type]MessageType{
		reflect.TypeFor[*lockstate.CreateSession]():  CreateSessionType,
		reflect.TypeFor[*lockstate.CloseSession]():   CloseSessionType,
		reflect.TypeFor[*lockstate.ExpireSession]():  ExpireSessionType,
		reflect.TypeFor[*lockstate.Acquire]():        AcquireType,
		reflect.TypeFor[*lockstate.Release]():        ReleaseType,
		reflect.TypeFor[*lockstate.Surrender]():      SurrenderType,
		reflect.TypeFor[*lockstate.Cancel]():         CancelType,
		reflect.TypeFor[*lockstate.Tick]():           TickType,
		reflect.TypeFor[*lockstate.Revoke]():         RevokeType,
		reflect.TypeFor[*lockstate.BootstrapACL]():   BootstrapACLType,
		reflect.TypeFor[*lockstate.CreateToken]():    CreateTokenType,
		reflect.TypeFor[*lockstate.DeleteToken]():    DeleteTokenType,
		reflect.TypeFor[*lockstate.DenyCert]():       DenyCertType,
		reflect.TypeFor[*lockstate.Proclaim]():       ProclaimType,
		reflect.TypeFor[*lockstate.ExpireSessions](): ExpireSessionsType,
	}
	seen := make(map[MessageType]bool)
	for _, now := range []int64{0, 1, -1, 1_700_000_000_123_456_789, 1<<63 - 1, -1 << 63} {
		for _, cmd := range sampleCommands() {
			t.Run(reflect.TypeOf(cmd).Elem().Name(), func(t *testing.T) {
				b, err := Encode(now, cmd)
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				if MessageType(b[0]) != ChecksummedType {
					t.Fatalf("first byte %v, want the envelope", MessageType(b[0]))
				}
				if got, want := MessageType(b[envelopeHead]), wantTypes[reflect.TypeOf(cmd)]; got != want {
					t.Fatalf("inner type byte %v, want %v", got, want)
				}
				seen[MessageType(b[envelopeHead])] = true
				gotNow, got, err := Decode(b)
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if gotNow != now || !reflect.DeepEqual(got, cmd) {
					t.Fatalf("round trip:\n got %d %#v\nwant %d %#v", gotNow, got, now, cmd)
				}
			})
		}
	}
	if len(seen) != len(wantTypes) {
		t.Fatalf("covered %d command types, want %d", len(seen), len(wantTypes))
	}
	for i, c := range commandTypes {
		if c.typ != nil && !seen[MessageType(i)] {
			t.Errorf("command type %v has no round-trip case", MessageType(i))
		}
	}
}

// foreignCommand is a Command type that has no codec row.
type foreignCommand struct{ *lockstate.Tick }

func TestEncodeRejects(t *testing.T) {
	var nilAcquire *lockstate.Acquire
	for _, cmd := range []lockstate.Command{nil, nilAcquire, foreignCommand{&lockstate.Tick{}}} {
		if _, err := Encode(1, cmd); err == nil {
			t.Errorf("Encode(%#v) succeeded", cmd)
		}
	}
}

// body builds an entry from a type byte and raw msgpack values.
func body(t *testing.T, typ MessageType, vals ...any) []byte {
	t.Helper()
	b := []byte{byte(typ)}
	for _, v := range vals {
		m, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, m...)
	}
	return b
}

func TestDecodeGarbage(t *testing.T) {
	good, err := Encode(5, &lockstate.Acquire{Session: 1, Locks: []lockstate.LockSpec{{Name: "a", Mode: lockstate.Write}}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":               {},
		"type only":           {byte(AcquireType)},
		"truncated":           good[:len(good)-1],
		"trailing byte":       append(append([]byte{}, good...), 0),
		"not msgpack":         {byte(AcquireType), 0xc1}, // 0xc1 is never used
		"array of 1":          body(t, AcquireType, []any{5}),
		"array of 3":          body(t, AcquireType, []any{5, map[string]any{}, 1}),
		"map body":            body(t, AcquireType, map[string]any{"now": 5}),
		"now not a number":    body(t, TickType, []any{"x", map[string]any{}}),
		"command not a map":   body(t, TickType, []any{5, []any{}}),
		"command nil":         body(t, TickType, []any{5, nil}),
		"unknown field":       body(t, CloseSessionType, []any{5, map[string]any{"session": 1, "force": true}}),
		"field of wrong type": body(t, CloseSessionType, []any{5, map[string]any{"session": "one"}}),
		"locks not an array":  body(t, AcquireType, []any{5, map[string]any{"session": 1, "locks": 3}}),
		"huge array length":   {byte(AcquireType), 0x92, 0x05, 0x81, 0xa5, 'l', 'o', 'c', 'k', 's', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"huge string length":  {byte(ReleaseType), 0x92, 0x05, 0x81, 0xa4, 'n', 'a', 'm', 'e', 0xdb, 0xff, 0xff, 0xff, 0xff},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			now, cmd, err := Decode(b)
			if err == nil {
				t.Fatalf("decoded %d %#v", now, cmd)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

func TestDecodeUnknownType(t *testing.T) {
	for _, tc := range []struct {
		typ       MessageType
		ignorable bool
	}{
		{0, false},
		{16, false}, // the first type after the registry's
		{0x7e, false},
		{IgnoreUnknownFlag, true},
		{IgnoreUnknownFlag | 16, true},
		{0xfe, true},
	} {
		// Bare, as older builds wrote entries, and in the envelope: an
		// unknown command is the same either way.
		bare := body(t, tc.typ, []any{5, map[string]any{}})
		for _, b := range [][]byte{bare, envelope(bare)} {
			_, _, err := Decode(b)
			var ute *UnknownTypeError
			if !errors.As(err, &ute) {
				t.Fatalf("type %d: error %v, want *UnknownTypeError", tc.typ, err)
			}
			if ute.Type != tc.typ || ute.Ignorable() != tc.ignorable {
				t.Errorf("type %d: got %+v ignorable=%t, want ignorable=%t", tc.typ, ute, ute.Ignorable(), tc.ignorable)
			}
		}
	}

	// A known type with the flag set is applied as usual (Consul's rule).
	now, cmd, err := Decode(body(t, IgnoreUnknownFlag|CloseSessionType, []any{5, map[string]any{"session": 3}}))
	if err != nil || now != 5 || !reflect.DeepEqual(cmd, &lockstate.CloseSession{Session: 3}) {
		t.Fatalf("flagged known type: %d %#v %v", now, cmd, err)
	}
}

func TestMessageTypeString(t *testing.T) {
	for typ, want := range map[MessageType]string{
		AcquireType:                     "acquire",
		AcquireType | IgnoreUnknownFlag: "acquire|ignorable",
		42:                              "type(42)",
		ChecksummedType:                 "checksummed",
	} {
		if got := typ.String(); got != want {
			t.Errorf("%d: %q, want %q", uint8(typ), got, want)
		}
	}
}

// fill sets every field of v, recursively, to a value that is not zero,
// so that an encoded command carries every one of its msgpack fields.
func fill(v reflect.Value, seed int) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), seed+i+1)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), seed*3+i)
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", seed))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(seed) * -1_000_003)
	case reflect.Uint8, reflect.Uint64:
		v.SetUint(uint64(seed) % 200)
	default:
		panic("fill: add kind " + v.Kind().String())
	}
}

// TestCodecEveryField round-trips every command with every field set, so
// a field added to or renamed in lockstate fails here until the decoders
// in commands.go know it.
func TestCodecEveryField(t *testing.T) {
	for i, ct := range commandTypes {
		if ct.typ == nil {
			continue
		}
		v := reflect.New(ct.typ).Elem()
		fill(v, 1)
		cmd := v.Interface().(lockstate.Command)
		b, err := Encode(99, cmd)
		if err != nil {
			t.Fatalf("%v: %v", MessageType(i), err)
		}
		_, got, err := Decode(b)
		if err != nil {
			t.Fatalf("%v: Decode: %v\nentry %x", MessageType(i), err, b)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Fatalf("%v: round trip:\n got %#v\nwant %#v", MessageType(i), got, cmd)
		}
		// And msgpack's own decoder reads our encoding the same way.
		if lib := libDecode(t, b); !reflect.DeepEqual(lib, cmd) {
			t.Fatalf("%v: msgpack decodes %#v", MessageType(i), lib)
		}
	}
}

// libDecode decodes an entry's command with msgpack's reflection decoder.
// Only give it entries Decode accepted: on others it may try to allocate
// whatever length they declare (see scan.go).
func libDecode(t testing.TB, b []byte) lockstate.Command {
	t.Helper()
	if MessageType(b[0])&^IgnoreUnknownFlag == ChecksummedType {
		b = b[envelopeHead:]
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b[1:]))
	dec.DisallowUnknownFields(true)
	if n, err := dec.DecodeArrayLen(); err != nil || n != 2 {
		t.Fatalf("msgpack: array %d %v", n, err)
	}
	if _, err := dec.DecodeInt64(); err != nil {
		t.Fatalf("msgpack: now: %v", err)
	}
	cmd := reflect.New(commandTypes[MessageType(b[0])&^IgnoreUnknownFlag].typ.Elem()).Interface()
	if err := dec.Decode(cmd); err != nil {
		t.Fatalf("msgpack rejects what Decode accepted: %v", err)
	}
	return cmd.(lockstate.Command)
}

// TestDecodeStrict covers the inputs msgpack's own decoder would coerce
// or let through and Decode refuses.
func TestDecodeStrict(t *testing.T) {
	str8 := func(s string) []byte { return append([]byte{0xd9, byte(len(s))}, s...) }
	entry := func(typ MessageType, fields ...[]byte) []byte {
		b := []byte{byte(typ), 0x92, 0x01, 0x80 | byte(len(fields)/2)}
		for _, f := range fields {
			b = append(b, f...)
		}
		return b
	}
	key := func(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }
	cases := map[string][]byte{
		"repeated key":         entry(CloseSessionType, key("session"), []byte{1}, key("session"), []byte{2}),
		"negative session":     entry(CloseSessionType, key("session"), []byte{0xff}),
		"float session":        entry(CloseSessionType, key("session"), []byte{0xca, 0x3f, 0x80, 0, 0}),
		"nil session":          entry(CloseSessionType, key("session"), []byte{0xc0}),
		"mode over 255":        entry(AcquireType, key("locks"), []byte{0x91, 0x81}, key("mode"), []byte{0xcd, 0x01, 0x00}),
		"ttl over int64":       entry(CreateSessionType, key("ttl"), []byte{0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0}),
		"bin string":           entry(ReleaseType, key("name"), []byte{0xc4, 1, 'a'}),
		"int key":              entry(CloseSessionType, []byte{0x01}, []byte{1}),
		"bool from int":        entry(CreateSessionType, key("ordered"), []byte{1}),
		"lock spec nil":        entry(AcquireType, key("locks"), []byte{0x91, 0xc0}),
		"more entries":         entry(SurrenderType, key("session"), []byte{1}, key("name"), []byte{0xa1, 'a'}, key("nome"), []byte{0xa1, 'a'}),
		"str8 count past end":  entry(ReleaseType, key("name"), []byte{0xd9, 9, 'a'}),
		"map16 count past end": {byte(TickType), 0x92, 0x01, 0xde, 0xff, 0xff},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if now, cmd, err := Decode(b); err == nil || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode: %d %#v %v", now, cmd, err)
			}
		})
	}
	// The long forms of the short codes decode the same.
	b := entry(ReleaseType, str8("session"), []byte{0xd3, 0, 0, 0, 0, 0, 0, 0, 7}, str8("name"), str8("db"))
	if _, cmd, err := Decode(b); err != nil || !reflect.DeepEqual(cmd, &lockstate.Release{Session: 7, Name: "db"}) {
		t.Fatalf("long forms: %#v %v", cmd, err)
	}
}

// format2Fields are the fields each command had before FormatACL: what the
// decoders of a format 2 build accept (from commands.go before FormatACL).
var format2Fields = map[MessageType][]string{
	CreateSessionType: {"name", "ttl", "on_deadlock", "ordered", "lock_delay"},
	CloseSessionType:  {"session"},
	ExpireSessionType: {"session"},
	AcquireType: {"session", "request_id", "locks", "require", "wait", "hold_ttl",
		"locks.name", "locks.mode", "locks.weight", "locks.limit"},
	ReleaseType:   {"session", "name", "request_id"},
	SurrenderType: {"session", "name"},
	CancelType:    {"session", "request_id"},
	TickType:      {},
}

// TestFormatGateEveryField sets each field of each command alone: format 2
// must refuse the command unless what it writes holds only fields a format
// 2 build decodes, and must refuse the commands of FormatACL.
func TestFormatGateEveryField(t *testing.T) {
	for i, ct := range commandTypes {
		if ct.typ == nil {
			continue
		}
		old, known := format2Fields[MessageType(i)]
		for f := range ct.typ.Elem().NumField() {
			v := reflect.New(ct.typ.Elem())
			fill(v.Elem().Field(f), f+1)
			cmd := v.Interface().(lockstate.Command)
			name := fmt.Sprintf("%v.%s", MessageType(i), ct.typ.Elem().Field(f).Name)
			_, err := EncodeFormat(FormatChecksummed, 1, cmd)
			if err != nil && !errors.Is(err, ErrFormatTooOld) {
				t.Fatalf("%s: %v", name, err)
			}
			keys := entryKeys(t, cmd)
			fits := known && !slices.ContainsFunc(keys, func(k string) bool { return !slices.Contains(old, k) })
			if fits != (err == nil) {
				t.Errorf("%s writes %v: format 2 error %v", name, keys, err)
			}
			if (MinFormat(cmd) < FormatACL) != fits {
				t.Errorf("%s writes %v: MinFormat %d", name, keys, MinFormat(cmd))
			}
		}
	}
}

// entryKeys returns the fields of cmd's map as Encode writes it, and of
// the maps in its arrays (a lock's "value" is "locks.value").
func entryKeys(t *testing.T, cmd lockstate.Command) []string {
	t.Helper()
	b, err := Encode(1, cmd)
	if err != nil {
		t.Fatal(err)
	}
	var body []msgpack.RawMessage
	var m map[string]msgpack.RawMessage
	if err := msgpack.Unmarshal(b[envelopeHead+1:], &body); err != nil || len(body) != 2 {
		t.Fatalf("body %v: %v", body, err)
	}
	if err := msgpack.Unmarshal(body[1], &m); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		var elems []map[string]msgpack.RawMessage
		if msgpack.Unmarshal(m[k], &elems) != nil {
			continue // not an array of maps
		}
		for _, e := range elems {
			for sub := range e {
				if full := k + "." + sub; !slices.Contains(keys, full) {
					keys = append(keys, full)
				}
			}
		}
	}
	return keys
}
