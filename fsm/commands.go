package fsm

import (
	"github.com/lockd/lockd/lockstate"
)

// Command types. Values are written to the log forever: never reuse or
// renumber one. 0 is never valid, so a zeroed entry cannot pass for a
// command, and values stay below IgnoreUnknownFlag.
const (
	CreateSessionType MessageType = 1
	CloseSessionType  MessageType = 2
	ExpireSessionType MessageType = 3
	AcquireType       MessageType = 4
	ReleaseType       MessageType = 5
	SurrenderType     MessageType = 6
	CancelType        MessageType = 7
	TickType          MessageType = 8
	// Since FormatACL (client trust: ACLs, session keys, limits):
	RevokeType       MessageType = 9
	BootstrapACLType MessageType = 10
	CreateTokenType  MessageType = 11
	DeleteTokenType  MessageType = 12
	// Since FormatDenyCert:
	DenyCertType MessageType = 13
	// Since FormatHoldValues:
	ProclaimType MessageType = 14
	// Since FormatExpireBatch:
	ExpireSessionsType MessageType = 15
)

// ChecksummedType is not a command: it marks the envelope Encode writes
// around every command since FormatChecksummed (see Encode). It takes the last value
// below IgnoreUnknownFlag so that commands, numbered up from 1, never reach
// it, and it has no row in commandTypes.
const ChecksummedType MessageType = 0x7f

// commandTypes is the registry of commands, indexed by MessageType without
// IgnoreUnknownFlag, and the only list of them: one row per command, with
// its name, the oldest log format that knows its type, its decoder
// (generated from its msgpack tags into codec_gen.go: see Decode) and, for
// a command the leader completes before proposing it, where its leader's
// fields are (LeaderFields). Whether a command acts for a client,
// and so carries the caller's token, its type says: it embeds
// lockstate.Authority. docs/architecture.md ("Adding a command") walks
// through the whole path; TestRegistryComplete fails when a command misses
// a part of it. An optional command that older builds may skip is written
// with IgnoreUnknownFlag set.
var commandTypes = [IgnoreUnknownFlag]commandType{
	CreateSessionType:  row("create_session", FormatBare, decodeCreateSession, createSessionLeader),
	CloseSessionType:   row("close_session", FormatBare, decodeCloseSession, nil),
	ExpireSessionType:  row("expire_session", FormatBare, decodeExpireSession, nil),
	AcquireType:        row("acquire", FormatBare, decodeAcquire, acquireLeader),
	ReleaseType:        row("release", FormatBare, decodeRelease, nil),
	SurrenderType:      row("surrender", FormatBare, decodeSurrender, nil),
	CancelType:         row("cancel", FormatBare, decodeCancel, nil),
	TickType:           row("tick", FormatBare, decodeTick, nil),
	RevokeType:         row("revoke", FormatACL, decodeRevoke, nil),
	BootstrapACLType:   row("bootstrap_acl", FormatACL, decodeBootstrapACL, nil),
	CreateTokenType:    row("create_token", FormatACL, decodeCreateToken, nil).writtenAs(createTokenBody),
	DeleteTokenType:    row("delete_token", FormatACL, decodeDeleteToken, nil).writtenAs(deleteTokenBody),
	DenyCertType:       row("deny_cert", FormatDenyCert, decodeDenyCert, nil),
	ProclaimType:       row("proclaim", FormatHoldValues, decodeProclaim, nil),
	ExpireSessionsType: row("expire_sessions", FormatExpireBatch, decodeExpireSessions, nil),
}

// createSessionLeader: the leader draws a new session's key and stamps
// its limits.
func createSessionLeader(c *lockstate.CreateSession) LeaderFields {
	return LeaderFields{Key: &c.Key, Limits: &c.Limits}
}

// acquireLeader: the leader stamps its limits on an acquire, and whether
// its request id is scoped to its session.
func acquireLeader(c *lockstate.Acquire) LeaderFields {
	return LeaderFields{Limits: &c.Limits, SessionScoped: &c.SessionScoped}
}

// The token commands write "auth" even when it is empty, as they have
// since they came, where every other command leaves an empty Authority
// out: Encode writes them through these bodies, whose own "auth" comes
// first and shadows the embedded one, so that their entries keep their
// bytes (TestAuthorityEncodesAsBefore).

func createTokenBody(cmd lockstate.Command) any {
	c := cmd.(*lockstate.CreateToken)
	return &struct {
		Auth                  string `msgpack:"auth"`
		lockstate.CreateToken `msgpack:",inline"`
	}{c.Auth, *c}
}

func deleteTokenBody(cmd lockstate.Command) any {
	c := cmd.(*lockstate.DeleteToken)
	return &struct {
		Auth                  string `msgpack:"auth"`
		lockstate.DeleteToken `msgpack:",inline"`
	}{c.Auth, *c}
}
