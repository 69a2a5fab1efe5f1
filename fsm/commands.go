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
)

// ChecksummedType is not a command: it marks the envelope Encode writes
// around every command since FormatChecksummed (see Encode). It takes the last value
// below IgnoreUnknownFlag so that commands, numbered up from 1, never reach
// it, and it has no row in commandTypes.
const ChecksummedType MessageType = 0x7f

// commandTypes is the registry of commands, indexed by MessageType without
// IgnoreUnknownFlag, and the only list of them: one row per command, with
// its name, the oldest log format that knows its type, its decoder (below)
// and, for a command the leader completes before proposing it, where its
// leader's fields are (LeaderFields). Whether a command acts for a client,
// and so carries the caller's token, its type says: it embeds
// lockstate.Authority. docs/architecture.md ("Adding a command") walks
// through the whole path; TestRegistryComplete fails when a command misses
// a part of it. An optional command that older builds may skip is written
// with IgnoreUnknownFlag set.
var commandTypes = [IgnoreUnknownFlag]commandType{
	CreateSessionType: row("create_session", FormatBare, decodeCreateSession, createSessionLeader),
	CloseSessionType:  row("close_session", FormatBare, decodeCloseSession, nil),
	ExpireSessionType: row("expire_session", FormatBare, decodeExpireSession, nil),
	AcquireType:       row("acquire", FormatBare, decodeAcquire, acquireLeader),
	ReleaseType:       row("release", FormatBare, decodeRelease, nil),
	SurrenderType:     row("surrender", FormatBare, decodeSurrender, nil),
	CancelType:        row("cancel", FormatBare, decodeCancel, nil),
	TickType:          row("tick", FormatBare, decodeTick, nil),
	RevokeType:        row("revoke", FormatACL, decodeRevoke, nil),
	BootstrapACLType:  row("bootstrap_acl", FormatACL, decodeBootstrapACL, nil),
	CreateTokenType:   row("create_token", FormatACL, decodeCreateToken, nil).writtenAs(createTokenBody),
	DeleteTokenType:   row("delete_token", FormatACL, decodeDeleteToken, nil).writtenAs(deleteTokenBody),
	DenyCertType:      row("deny_cert", FormatDenyCert, decodeDenyCert, nil),
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

// The decoders below read each command's map by the msgpack tags of its
// lockstate type (Encode writes it with the msgpack library, through those
// tags). TestCodecEveryField encodes every command with every field set,
// so a field added to or renamed in lockstate fails it until it is added
// here.

func decodeCreateSession(r *mpReader, c *lockstate.CreateSession) error {
	return r.readStruct(8, func(k []byte) (bool, error) {
		switch string(k) {
		case "key":
			return true, readString(r, &c.Key)
		case "auth":
			return true, readString(r, &c.Auth)
		case "limits":
			return true, decodeLimits(r, &c.Limits)
		case "name":
			return true, readString(r, &c.Name)
		case "ttl":
			return true, readInt(r, &c.TTL)
		case "on_deadlock":
			return true, readString(r, &c.OnDeadlock)
		case "ordered":
			return true, readBool(r, &c.Ordered)
		case "lock_delay":
			return true, readInt(r, &c.LockDelay)
		}
		return false, nil
	})
}

func decodeCloseSession(r *mpReader, c *lockstate.CloseSession) error {
	return r.readStruct(2, func(k []byte) (bool, error) {
		switch string(k) {
		case "session":
			return true, readUint(r, &c.Session)
		case "auth":
			return true, readString(r, &c.Auth)
		}
		return false, nil
	})
}

func decodeExpireSession(r *mpReader, c *lockstate.ExpireSession) error {
	return r.readStruct(1, func(k []byte) (bool, error) {
		if string(k) == "session" {
			return true, readUint(r, &c.Session)
		}
		return false, nil
	})
}

func decodeAcquire(r *mpReader, c *lockstate.Acquire) error {
	return r.readStruct(9, func(k []byte) (bool, error) {
		switch string(k) {
		case "session_scoped":
			return true, readBool(r, &c.SessionScoped)
		case "auth":
			return true, readString(r, &c.Auth)
		case "limits":
			return true, decodeLimits(r, &c.Limits)
		case "session":
			return true, readUint(r, &c.Session)
		case "request_id":
			return true, readString(r, &c.RequestID)
		case "locks":
			return true, readSlice(r, &c.Locks, func(sp *lockstate.LockSpec) error { return decodeLockSpec(r, sp) })
		case "require":
			return true, readString(r, &c.Require)
		case "wait":
			return true, readInt(r, &c.Wait)
		case "hold_ttl":
			return true, readInt(r, &c.HoldTTL)
		}
		return false, nil
	})
}

func decodeLockSpec(r *mpReader, sp *lockstate.LockSpec) error {
	return r.readStruct(4, func(k []byte) (bool, error) {
		switch string(k) {
		case "name":
			return true, readString(r, &sp.Name)
		case "mode":
			return true, readUint(r, &sp.Mode)
		case "weight":
			return true, readInt(r, &sp.Weight)
		case "limit":
			return true, readInt(r, &sp.Limit)
		}
		return false, nil
	})
}

func decodeRelease(r *mpReader, c *lockstate.Release) error {
	return r.readStruct(4, func(k []byte) (bool, error) {
		switch string(k) {
		case "auth":
			return true, readString(r, &c.Auth)
		case "session":
			return true, readUint(r, &c.Session)
		case "name":
			return true, readString(r, &c.Name)
		case "request_id":
			return true, readString(r, &c.RequestID)
		}
		return false, nil
	})
}

func decodeSurrender(r *mpReader, c *lockstate.Surrender) error {
	return r.readStruct(3, func(k []byte) (bool, error) {
		switch string(k) {
		case "auth":
			return true, readString(r, &c.Auth)
		case "session":
			return true, readUint(r, &c.Session)
		case "name":
			return true, readString(r, &c.Name)
		}
		return false, nil
	})
}

func decodeCancel(r *mpReader, c *lockstate.Cancel) error {
	return r.readStruct(3, func(k []byte) (bool, error) {
		switch string(k) {
		case "auth":
			return true, readString(r, &c.Auth)
		case "session":
			return true, readUint(r, &c.Session)
		case "request_id":
			return true, readString(r, &c.RequestID)
		}
		return false, nil
	})
}

func decodeTick(r *mpReader, _ *lockstate.Tick) error {
	return r.readStruct(0, func([]byte) (bool, error) { return false, nil })
}

// decodeLimits reads a Limits map; nil reads as no Limits.
func decodeLimits(r *mpReader, p **lockstate.Limits) error {
	if r.pos < len(r.b) && r.b[r.pos] == 0xc0 {
		r.pos++
		*p = nil
		return nil
	}
	l := new(lockstate.Limits)
	*p = l
	return r.readStruct(6, func(k []byte) (bool, error) {
		switch string(k) {
		case "sessions_per_token":
			return true, readInt(r, &l.SessionsPerToken)
		case "waiters_per_token":
			return true, readInt(r, &l.WaitersPerToken)
		case "sessions":
			return true, readInt(r, &l.Sessions)
		case "holds_per_session":
			return true, readInt(r, &l.HoldsPerSession)
		case "waiters_per_name":
			return true, readInt(r, &l.WaitersPerName)
		case "waiters":
			return true, readInt(r, &l.Waiters)
		}
		return false, nil
	})
}

func decodeRevoke(r *mpReader, c *lockstate.Revoke) error {
	return r.readStruct(2, func(k []byte) (bool, error) {
		switch string(k) {
		case "name":
			return true, readString(r, &c.Name)
		case "auth":
			return true, readString(r, &c.Auth)
		}
		return false, nil
	})
}

func decodeBootstrapACL(r *mpReader, c *lockstate.BootstrapACL) error {
	return r.readStruct(2, func(k []byte) (bool, error) {
		switch string(k) {
		case "id":
			return true, readString(r, &c.ID)
		case "hash":
			return true, readString(r, &c.Hash)
		}
		return false, nil
	})
}

func decodeCreateToken(r *mpReader, c *lockstate.CreateToken) error {
	return r.readStruct(6, func(k []byte) (bool, error) {
		switch string(k) {
		case "limits":
			return true, decodeTokenLimits(r, &c.Limits)
		case "auth":
			return true, readString(r, &c.Auth)
		case "id":
			return true, readString(r, &c.ID)
		case "hash":
			return true, readString(r, &c.Hash)
		case "name":
			return true, readString(r, &c.Name)
		case "rules":
			return true, readSlice(r, &c.Rules, func(rule *lockstate.Rule) error { return decodeRule(r, rule) })
		}
		return false, nil
	})
}

// decodeTokenLimits reads a token's own limits; nil reads as none.
func decodeTokenLimits(r *mpReader, p **lockstate.TokenLimits) error {
	if r.pos < len(r.b) && r.b[r.pos] == 0xc0 {
		r.pos++
		*p = nil
		return nil
	}
	l := new(lockstate.TokenLimits)
	*p = l
	return r.readStruct(2, func(k []byte) (bool, error) {
		switch string(k) {
		case "sessions":
			return true, readInt(r, &l.Sessions)
		case "waiters":
			return true, readInt(r, &l.Waiters)
		}
		return false, nil
	})
}

func decodeRule(r *mpReader, rule *lockstate.Rule) error {
	return r.readStruct(2, func(k []byte) (bool, error) {
		switch string(k) {
		case "prefix":
			return true, readString(r, &rule.Prefix)
		case "access":
			return true, readString(r, &rule.Access)
		}
		return false, nil
	})
}

func decodeDeleteToken(r *mpReader, c *lockstate.DeleteToken) error {
	return r.readStruct(2, func(k []byte) (bool, error) {
		switch string(k) {
		case "auth":
			return true, readString(r, &c.Auth)
		case "id":
			return true, readString(r, &c.ID)
		}
		return false, nil
	})
}

func decodeDenyCert(r *mpReader, c *lockstate.DenyCert) error {
	return r.readStruct(3, func(k []byte) (bool, error) {
		switch string(k) {
		case "auth":
			return true, readString(r, &c.Auth)
		case "serial":
			return true, readString(r, &c.Serial)
		case "reason":
			return true, readString(r, &c.Reason)
		}
		return false, nil
	})
}
