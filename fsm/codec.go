package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lockd/lockd/lockstate"
)

// MessageType is the first byte of every log entry: which command follows.
// The values and the registry of commands are in commands.go.
type MessageType uint8

// IgnoreUnknownFlag marks a command that a build which does not know its
// type may skip. A later version sets it on optional commands that do not
// change the lock table. As in Consul, the flag is stripped before the type
// is looked up: a flagged type this build knows is applied as usual.
const IgnoreUnknownFlag MessageType = 0x80

// commandType is one row of the command registry: the command's name for
// messages, the Go type Encode accepts, the oldest format that knows the
// type, the decoder for its body and where its leader's fields are.
type commandType struct {
	name   string
	typ    reflect.Type
	since  Format
	decode func(b []byte) (cmd lockstate.Command, rest []byte, err error)
	leader func(cmd lockstate.Command) LeaderFields // nil: the leader fills in nothing
	body   func(cmd lockstate.Command) any          // what Encode writes for it; nil: the command itself
}

// row makes the registry row of the command type *T from the function
// that reads its fields and, if the leader completes it, the function that
// finds its leader's fields (nil otherwise).
func row[T any, P interface {
	*T
	lockstate.Command
}](name string, since Format, fields func(r *mpReader, c P) error, leader func(c P) LeaderFields) commandType {
	ct := commandType{name: name, typ: reflect.TypeFor[P](), since: since}
	ct.decode = func(b []byte) (lockstate.Command, []byte, error) {
		c, r := P(new(T)), &mpReader{b: b}
		err := fields(r, c)
		return c, r.left(), err
	}
	if leader != nil {
		ct.leader = func(cmd lockstate.Command) LeaderFields { return leader(cmd.(P)) }
	}
	return ct
}

// writtenAs returns the row with body: what Encode writes for such a
// command instead of the command itself.
func (ct commandType) writtenAs(body func(cmd lockstate.Command) any) commandType {
	ct.body = body
	return ct
}

// rowOf returns cmd's registry row, or nil for a type this build does not
// know.
func rowOf(cmd lockstate.Command) *commandType {
	t, ok := typeOf[reflect.TypeOf(cmd)]
	if !ok {
		return nil
	}
	return &commandTypes[t]
}

// NewCommand returns a new zero command of type t (IgnoreUnknownFlag
// aside), or nil for a type this build does not know: a way through the
// registry for the layers above it, whose tests check that every command
// has its part there.
func NewCommand(t MessageType) lockstate.Command {
	ct := &commandTypes[t&^IgnoreUnknownFlag]
	if ct.typ == nil {
		return nil
	}
	return reflect.New(ct.typ.Elem()).Interface().(lockstate.Command)
}

// LeaderFields are the fields of a command that only the leader fills in,
// just before it proposes (raftnode): nil where the command has no such
// field. Key and Limits came with FormatACL, SessionScoped with
// FormatSessionRequestIDs.
type LeaderFields struct {
	Key    *string            // a new session's key, drawn at random
	Limits **lockstate.Limits // the leader's configured limits; nil for none
	// SessionScoped: the request id is the session's own, set once every
	// voter applies FormatSessionRequestIDs (lockstate.Acquire).
	SessionScoped *bool
}

// LeaderFieldsOf returns where cmd's leader fields are (none for most
// commands and for a type this build does not know).
func LeaderFieldsOf(cmd lockstate.Command) LeaderFields {
	if ct := rowOf(cmd); ct != nil && ct.leader != nil && !reflect.ValueOf(cmd).IsNil() {
		return ct.leader(cmd)
	}
	return LeaderFields{}
}

// typeOf maps a command's dynamic Go type back to its MessageType. It is
// built from commandTypes so the registry stays the only list of commands.
var typeOf = func() map[reflect.Type]MessageType {
	m := make(map[reflect.Type]MessageType)
	for t, c := range commandTypes {
		if c.typ != nil {
			m[c.typ] = MessageType(t)
		}
	}
	return m
}()

// String returns the command's name, "checksummed" for the envelope, or
// "type(N)" for an unknown type.
func (t MessageType) String() string {
	base := t &^ IgnoreUnknownFlag
	if base == ChecksummedType {
		return "checksummed"
	}
	if c := commandTypes[base]; c.typ != nil {
		if t&IgnoreUnknownFlag != 0 {
			return c.name + "|ignorable"
		}
		return c.name
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// ErrMalformed is wrapped by every Decode error other than an unknown type:
// the entry is empty, truncated, not msgpack, not the shape of its type, or
// fails its checksum.
var ErrMalformed = errors.New("malformed entry")

// UnknownTypeError is returned by Decode for a type byte this build does
// not know.
type UnknownTypeError struct {
	Type MessageType
}

func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("fsm: unknown command type %d (ignorable: %t)", uint8(e.Type), e.Ignorable())
}

// Ignorable reports whether the entry carries IgnoreUnknownFlag and may be
// skipped.
func (e *UnknownTypeError) Ignorable() bool { return e.Type&IgnoreUnknownFlag != 0 }

// ErrChecksum is wrapped by the errors of Decode and Restore for bytes that
// fail their CRC-32C: they were damaged after they were written, on disk,
// in memory or on the wire. Decode's also wrap ErrMalformed.
var ErrChecksum = errors.New("checksum mismatch")

// castagnoli is the CRC-32C table; hash/crc32 computes it in hardware on
// amd64 and arm64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// envelopeHead is the size of a checksummed entry's head: its type byte
// and its CRC-32C.
const envelopeHead = 1 + 4

// Format is a version of the log entry format. A build applies every
// format up to NewestFormat; a leader writes the newest that every voter
// applies (the cluster gossips each node's newest), so that a rolling
// upgrade never hands an older voter an entry it cannot apply. A format
// that adds commands gets a new number too.
type Format int

const (
	// FormatBare is a command as builds before checksums wrote it: its type
	// byte, then the msgpack array [now, cmd] with cmd as a map keyed by
	// its msgpack tags.
	FormatBare Format = 1
	// FormatChecksummed is a bare command inside the envelope
	//
	//	ChecksummedType, CRC-32C (Castagnoli) of the bare command (4 bytes, big endian), bare command
	FormatChecksummed Format = 2
	// FormatACL is FormatChecksummed whose commands may carry
	// the fields and types of client trust: session keys, Auth, Limits,
	// Revoke and the ACL token commands. An older build would refuse such
	// an entry (its decoders know only their own fields), so a leader
	// writes them only once every voter applies this format.
	FormatACL Format = 3
	// FormatTokenLimits is FormatACL whose Limits may carry the per-token
	// limits and whose CreateToken may carry a token's own limits. Only
	// such commands need it: every other command is written as in
	// FormatACL, byte for byte.
	FormatTokenLimits Format = 4
	// FormatDenyCert is FormatTokenLimits with one more command, DenyCert
	// (the certificate deny list). Every other command is written as in
	// FormatTokenLimits, byte for byte.
	FormatDenyCert Format = 5
	// FormatSessionRequestIDs is FormatDenyCert whose Acquire may carry
	// SessionScoped, the leader's word that its request id is its
	// session's own (two sessions may use one id). A build before it
	// would apply such an acquire by the older rule, refusing an id that
	// another session uses, and diverge: it refuses the entry instead.
	// Every other command is written as in FormatDenyCert, byte for byte.
	FormatSessionRequestIDs Format = 6
	// FormatHoldValues is FormatSessionRequestIDs with one more command,
	// Proclaim, and an Acquire whose locks may carry a value
	// (lockstate.LockSpec.Value). A build before it would refuse the
	// entry (its decoders know neither) and stop, never apply it without
	// the value: a leader writes it only once every voter applies this
	// format, and refuses it until then. Every other command is written
	// as in FormatSessionRequestIDs, byte for byte.
	FormatHoldValues Format = 7
	// FormatExpireBatch is FormatHoldValues with one more command,
	// ExpireSessions: one entry expires many sessions, where a build
	// before it would refuse the entry and stop. Until every voter applies
	// this format, a leader expires sessions one entry each, as before.
	// Every other command is written as in FormatHoldValues, byte for
	// byte.
	FormatExpireBatch Format = 8
	// NewestFormat is the newest format this build writes and applies.
	NewestFormat = FormatExpireBatch
)

// ErrFormatTooOld is wrapped by EncodeFormat's error for a command that the
// format asked for cannot carry: a voter runs an older build (or the
// leader has not yet seen every voter's build).
var ErrFormatTooOld = errors.New("log format too old for this command")

// MinFormat is the oldest format that can carry cmd: the oldest that
// knows its type (its registry row), or FormatACL if it carries a token
// (lockstate.Authority) or a leader's key or limits (LeaderFields), which
// came with that format; FormatTokenLimits if its leader's limits hold
// per-token ones or it carries a token's own limits (OwnLimits);
// FormatSessionRequestIDs if its request id is scoped to its session;
// FormatHoldValues if it gives a hold a value (HasValues). A type this
// build does not know gets FormatBare (Encode refuses it anyway).
func MinFormat(cmd lockstate.Command) Format {
	ct := rowOf(cmd)
	if ct == nil || reflect.ValueOf(cmd).IsNil() {
		return FormatBare
	}
	f := ct.since
	if a := lockstate.AuthorityOf(cmd); a != nil && a.Auth != "" {
		f = max(f, FormatACL)
	}
	l := LeaderFieldsOf(cmd)
	if l.Key != nil && *l.Key != "" || l.Limits != nil && *l.Limits != nil {
		f = max(f, FormatACL)
	}
	if l.Limits != nil && (*l.Limits).PerToken() {
		f = max(f, FormatTokenLimits)
	}
	if t, ok := cmd.(interface{ OwnLimits() bool }); ok && t.OwnLimits() {
		f = max(f, FormatTokenLimits)
	}
	if l.SessionScoped != nil && *l.SessionScoped {
		f = max(f, FormatSessionRequestIDs)
	}
	if v, ok := cmd.(interface{ HasValues() bool }); ok && v.HasValues() {
		f = max(f, FormatHoldValues)
	}
	return f
}

// Encode returns the log entry for cmd proposed at now (the leader's clock,
// Unix nanoseconds) in NewestFormat.
func Encode(now int64, cmd lockstate.Command) ([]byte, error) {
	return EncodeFormat(NewestFormat, now, cmd)
}

// EncodeFormat returns the log entry for cmd proposed at now in format f:
// bare below FormatChecksummed, checksummed from it on.
func EncodeFormat(f Format, now int64, cmd lockstate.Command) ([]byte, error) {
	t, ok := typeOf[reflect.TypeOf(cmd)]
	if !ok {
		return nil, fmt.Errorf("fsm: encode: %T is not a command this build knows", cmd)
	}
	if reflect.ValueOf(cmd).IsNil() {
		return nil, fmt.Errorf("fsm: encode: nil %T", cmd)
	}
	if min := MinFormat(cmd); f < min {
		return nil, fmt.Errorf("fsm: encode: %s needs log format %d, which this entry's format %d is not: "+
			"every voter must run a build that applies format %d first: %w", t, min, f, min, ErrFormatTooOld)
	}
	var buf bytes.Buffer
	buf.Grow(64)
	head := 0
	if f >= FormatChecksummed {
		head = envelopeHead
		buf.Write([]byte{byte(ChecksummedType), 0, 0, 0, 0}) // the checksum is filled in below
	}
	buf.WriteByte(byte(t))
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	enc.UseCompactInts(true)
	if err := enc.EncodeArrayLen(2); err != nil {
		return nil, fmt.Errorf("fsm: encode %s: %w", t, err)
	}
	if err := enc.EncodeInt(now); err != nil {
		return nil, fmt.Errorf("fsm: encode %s: %w", t, err)
	}
	var body any = cmd
	if ct := &commandTypes[t]; ct.body != nil {
		body = ct.body(cmd)
	}
	if err := enc.Encode(body); err != nil {
		return nil, fmt.Errorf("fsm: encode %s: %w", t, err)
	}
	b := buf.Bytes()
	if head > 0 {
		binary.BigEndian.PutUint32(b[1:head], crc32.Checksum(b[head:], castagnoli))
	}
	return b, nil
}

// Decode parses a log entry: a checksummed one as Encode writes it, or a
// bare command as builds before checksums wrote them, which carries no
// checksum and is read as it always was. It never panics, and allocates
// nothing for lengths the entry does not actually contain. It is strict,
// because a node that guesses would diverge from one that does not: the
// checksum must match, the body must be the array [now, map] and nothing
// after it; the map may carry only the command's own fields, each at most
// once (a newer writer must add a new command type instead); integers must
// fit their fields. An unknown type returns an *UnknownTypeError (for a
// checksummed entry, only once its checksum matched); every other failure
// wraps ErrMalformed, and a checksum that does not match also ErrChecksum.
func Decode(b []byte) (now int64, cmd lockstate.Command, err error) {
	// IgnoreUnknownFlag is stripped here as for commands (Consul's rule), so
	// a flipped top bit cannot turn the envelope into an entry to skip.
	if len(b) > 0 && MessageType(b[0])&^IgnoreUnknownFlag == ChecksummedType {
		if b, err = openEnvelope(b); err != nil {
			return 0, nil, err
		}
	}
	return decodeCommand(b)
}

// openEnvelope checks a checksummed entry and returns the entry inside it.
func openEnvelope(b []byte) ([]byte, error) {
	if len(b) <= envelopeHead {
		return nil, fmt.Errorf("fsm: decode: checksummed entry of %d bytes holds no entry: %w: %w", len(b), ErrChecksum, ErrMalformed)
	}
	inner := b[envelopeHead:]
	if got, want := crc32.Checksum(inner, castagnoli), binary.BigEndian.Uint32(b[1:envelopeHead]); got != want {
		return nil, fmt.Errorf("fsm: decode: the entry's CRC-32C is %08x, it was written with %08x: %w: %w", got, want, ErrChecksum, ErrMalformed)
	}
	if MessageType(inner[0])&^IgnoreUnknownFlag == ChecksummedType {
		return nil, fmt.Errorf("fsm: decode: checksummed entry inside another: %w", ErrMalformed)
	}
	return inner, nil
}

// decodeCommand parses a bare command: its type byte and msgpack body.
func decodeCommand(b []byte) (now int64, cmd lockstate.Command, err error) {
	if len(b) == 0 {
		return 0, nil, fmt.Errorf("fsm: decode: empty entry: %w", ErrMalformed)
	}
	t := MessageType(b[0])
	ct := &commandTypes[t&^IgnoreUnknownFlag]
	if ct.decode == nil {
		return 0, nil, &UnknownTypeError{Type: t}
	}
	r := mpReader{b: b[1:]}
	if n, err := r.arrayLen(); err != nil || n != 2 {
		return 0, nil, malformed(t, "body is not a 2-element array", err)
	}
	if now, err = r.int(); err != nil {
		return 0, nil, malformed(t, "now", err)
	}
	cmd, rest, err := ct.decode(r.left())
	if err != nil {
		return 0, nil, malformed(t, "command", err)
	}
	if len(rest) != 0 {
		return 0, nil, malformed(t, fmt.Sprintf("%d trailing bytes", len(rest)), nil)
	}
	return now, cmd, nil
}

func malformed(t MessageType, what string, err error) error {
	if err != nil {
		return fmt.Errorf("fsm: decode %s: %s: %w: %w", t, what, ErrMalformed, err)
	}
	return fmt.Errorf("fsm: decode %s: %s: %w", t, what, ErrMalformed)
}
