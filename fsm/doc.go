// Package fsm is the hashicorp/raft finite state machine around the
// lockstate lock table.
//
// Every log entry is one command: a type byte followed by a msgpack array
// [now, body], where now is the leader's timestamp (Unix nanoseconds) and
// body is the lockstate command. FSM.Apply decodes the entry, applies it
// to the table at the entry's index and time, and returns the table's
// *lockstate.Result to the proposer. An entry that does not decode means
// the binary and the log disagree: the node stops loudly rather than
// diverge.
//
// # The registry of commands
//
// commands.go holds the only list of commands: a row per type byte with
// the command's name, the oldest Format that knows it, its decoder and
// where the fields are that the leader fills in (LeaderFields). MinFormat,
// the leader's stamping (raftnode) and the node's filling in of the
// caller's token (lockservice, through lockstate.Authority) all read the
// command from there or from its own type, never from a list of their
// own; TestRegistryComplete fails for a command that misses a part.
//
// # The registry of snapshot records
//
// records.go holds, beside it, the only list of snapshot record kinds
// (recordKinds): a row per kind of lockstate.Record, in the stream's order,
// with its tag, its name, the snapshot format it came in (and a later one
// for a record that needs it: a token with limits of its own), its encoder
// and its decoder. The record type itself says how the loader takes it
// and what it adds to the digest (lockstate.Record's methods). Snapshot
// chooses the format by the rows, Persist writes each record through its
// row and counts the trailer from the stream, Restore accepts a tag only
// in its place and its format and decodes and loads through the row;
// TestRecordRegistryComplete and TestEveryRecordKind fail for a kind that
// misses a part.
//
// # Codecs
//
// Entries and snapshot records are msgpack maps keyed by the msgpack tags
// of the lockstate types. Encode writes commands with the msgpack library;
// everything else, the decoders of commands and records and the encoders
// of records, is straight-line code generated from those tags by go
// generate (internal/codecgen, into codec_gen.go), so that each field's
// wire name is written once, in its tag, and read and written without
// reflection: the library's reflection cost as much per entry as applying
// it, and seconds on a snapshot of a million locks. TestCodecGenerated
// fails when codec_gen.go is not what the types make; TestCodecEveryField
// and TestRecordCodec check both directions against the library.
//
// # Checksums
//
// Since FormatChecksummed Encode wraps every command in an envelope with
// a CRC-32C (Castagnoli) of it:
//
//	0x7f (ChecksummedType), CRC-32C of the command (4 bytes, big endian), command
//
// and Apply checks it on every node, on its own copy of the entry: an
// entry damaged on disk, in memory or on the wire stops the node through
// Config.Fatal, with the entry's index and term and what to do, instead of
// being applied (and the node's digest silently differing from the
// others'). Entries written before the envelope are bare commands; Decode
// reads them as it always did, unchecked: the log still holds them until
// a snapshot compacts them away, and the compatibility fixture in
// testdata/compat replays them.
//
// Snapshots (Persist, Restore) are a msgpack stream of the table's export
// records, in checksummed chunks since format 2 (see SnapshotFormat).
// Restore checks every chunk before its records are decoded, and builds a
// new table that it swaps in only once the whole stream has been read, so
// a damaged snapshot leaves the FSM as it was. Format 1 snapshots, without
// checksums, still restore. (Raft's file snapshot store also keeps a
// CRC-64 of each snapshot file; the chunks' checksums also cover a
// snapshot installed from the leader, which the store checksums only as
// received.)
//
// A CRC finds accidents, not tampering: whoever can write the log or a
// snapshot can also write a matching checksum, or rewrite an entry in the
// old bare form. Authenticating entries takes a key, which this package
// does not have.
//
// # Upgrades
//
// A build before the envelope does not know type 0x7f: it stops at the
// first checksummed entry (an unknown type without IgnoreUnknownFlag, on
// purpose: skipping it would diverge). So entries carry a Format, and a
// leader writes, with EncodeFormat, the newest one every voter applies
// (raftnode and cluster gossip each build's NewestFormat). Encode writes
// NewestFormat whatever the voters run: a follower forwarding a command to
// a leader on the old build with Encode gets it refused.
//
// FormatACL (client trust) adds fields to commands and four commands; a
// leader writes them only once every voter applies it (EncodeFormat
// refuses them in older formats), so ACLs, session keys and limits start
// working once the last voter is upgraded. FormatTokenLimits adds the
// per-token limits to Limits and a token's own limits to CreateToken; only
// commands that carry them need it (the leader leaves per-token limits out
// of its entries until every voter applies it), every other command is
// written as in FormatACL. FormatDenyCert adds the DenyCert command (the
// certificate deny list) the same way: a leader proposes it only once
// every voter applies that format, and refuses it until then.
//
// FormatSessionRequestIDs scopes request ids to their session. The rule
// is carried by the entry, not by the build: the leader sets an Acquire's
// SessionScoped (a LeaderFields field) only once every voter applies that
// format, and the table applies an acquire without it by the rule before
// (an id another session uses is refused), so an older voter and a newer
// one make the same of every entry, and an old log replays as it did. The
// lookups by id (Release, Cancel) answer as before in any table where no
// two sessions share an id, which only flagged acquires can make.
//
// FormatHoldValues gives holds a value: the Proclaim command, and an
// Acquire whose locks carry one (lockstate.LockSpec.Value). A build
// before it would refuse such an entry and stop (its decoders know
// neither), never apply it without the value: a leader proposes them
// only once every voter applies the format, and refuses them until then,
// as it does a DenyCert. An acquire without values is written as before.
//
// FormatExpireBatch adds ExpireSessions, one entry that expires many
// sessions in the leader's deadline order (a mass expiry in entries of
// hundreds, not one each). Before every voter applies it, the leader
// expires sessions one ExpireSession entry each, as older builds do.
//
// Snapshots are gated by content only: Persist writes the oldest format
// that carries every record of the table, as the registry of records says
// (format 3 for a table that has ACL state, session keys or revocations,
// which only FormatACL entries can create, 4 for a token that has its own
// limits, 5 for a table that denies a certificate, 7 for a hold or a
// request's lock that carries a value), format 6 for a table in which two
// sessions share a request id, and format 2 otherwise. A
// voter on a build before FormatChecksummed cannot install a format 2
// snapshot from an upgraded leader (raft retries until it is upgraded),
// and a node that has taken a snapshot cannot go back to a build that
// does not read its format.
//
// Readers look at the table under a read lock (FSM.Read), wait for the
// FSM's own applied index (FSM.WaitApplied, FSM.Changed) and follow what
// each entry changed (FSM.Subscribe).
package fsm
