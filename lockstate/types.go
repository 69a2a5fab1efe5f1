package lockstate

import (
	"fmt"
	"time"
)

// SessionID identifies a session inside the table: the Raft index of the
// entry that created it, so an older session always has a smaller id (the
// "youngest" of deadlock victims and every ordering use it). Clients never
// see it: they name a session by its key, an opaque random string the
// leader draws (CreateSession.Key); Table.SessionByKey maps one to the
// other.
type SessionID uint64

// Mode is how a lock is held: Read (shared) or Write (exclusive).
type Mode uint8

// Lock modes. Read is compatible with Read; anything else conflicts.
const (
	Read  Mode = 1
	Write Mode = 2
)

// String returns "read" or "write".
func (m Mode) String() string {
	switch m {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode parses "read" or "write"; "" means write.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "write":
		return Write, nil
	case "read":
		return Read, nil
	}
	return 0, fmt.Errorf("unknown mode %q (want read or write)", s)
}

// OnDeadlock says what happens to a session chosen as a deadlock victim.
type OnDeadlock string

// Deadlock policies; "" means Abort.
const (
	Abort         OnDeadlock = "abort"
	SurrenderLock OnDeadlock = "surrender"
)

// Status is the state of an acquire request.
type Status string

// Request statuses. Pending is the only non-final one.
const (
	Pending   Status = "pending"
	Granted   Status = "granted"
	TimedOut  Status = "timeout"
	Deadlock  Status = "deadlock"
	Cancelled Status = "cancelled"
	Released  Status = "released" // granted, and no longer held (released, expired, surrendered)
)

// Limits on what a command may carry. Command.Validate checks them, both in
// the API before proposing and in Apply, so a bad entry never changes the
// table.
const (
	MaxNameLen       = 512
	MaxSegments      = 16
	MaxSegmentLen    = 128
	MaxLocksPerReq   = 64
	MaxRequestIDLen  = 128
	MaxSessionName   = 256
	MaxLimit         = 1 << 20
	MinTTL           = time.Second
	MaxTTL           = 24 * time.Hour
	MaxLockDelay     = time.Minute
	MaxWait          = 24 * time.Hour
	MaxHoldTTL       = 24 * time.Hour
	DoneRequestsKept = 256 // finished requests remembered per session for idempotent retries
	RevocationsKept  = 16  // revoked holds remembered per session, to tell its client
	MinKeyLen        = 20  // a session key: at least 120 bits in base64url (the leader draws 128)
	MaxKeyLen        = 64
	MaxValueLen      = 4096 // a hold's value (LockSpec.Value, Proclaim.Value): UTF-8 text of at most this many bytes
)

// Entry is one committed log entry as the table sees it. Apply takes
// ownership of Cmd: it may fill defaults in place and keep its slices.
type Entry struct {
	Index uint64 // Raft index; becomes fencing tokens, versions and session ids
	Now   int64  // leader's wall clock when proposed, Unix nanoseconds
	Cmd   Command
}

// Command is one command of the log, always used as a pointer (*Acquire,
// *Tick, ...). Each command type is defined in one place: its struct, its
// Validate and its apply live together (session.go, acquire.go,
// release.go, deadline.go); one that acts for a client embeds Authority.
// Adding one means writing those, a row in the fsm package's registry (its
// type byte, name, format and decoder) and the lockservice method that
// proposes it (docs/architecture.md, "Adding a command"); the API gets its
// validation from Validate.
type Command interface {
	// Validate reports what is wrong with the command's content, or nil.
	// It looks at nothing but the command and changes nothing: the API
	// calls it before proposing, Table.Apply before applying.
	Validate() *Error

	// apply carries out a valid command at the table's current entry. It
	// returns an Error, and changes nothing, when the table's state
	// refuses the command (an unknown session, a lock not held, ...).
	apply(t *Table) Result
}

// Code is a machine-readable error code; the values are the API's codes.
type Code string

// Error codes a command can fail with.
const (
	CodeInvalid       Code = "invalid_request"
	CodeNoSession     Code = "session_not_found"
	CodeNoRequest     Code = "request_not_found"
	CodeNoLock        Code = "lock_not_found"
	CodeNoToken       Code = "token_not_found"
	CodeTimeout       Code = "timeout"
	CodeDeadlock      Code = "deadlock"
	CodePoorlyOrdered Code = "poorly_ordered_access"
	CodeNotHeld       Code = "not_held"
	CodeLimitMismatch Code = "limit_mismatch"
	CodeUnauthorized  Code = "unauthorized"   // the command's token does not exist (any more)
	CodeForbidden     Code = "forbidden"      // the token exists but lacks the right
	CodeLimit         Code = "limit_exceeded" // a configured limit (Limits) refused it
)

// Error is a domain failure: the command was well formed but could not be
// carried out. The table is unchanged when a command returns an Error.
type Error struct {
	Code    Code   `msgpack:"code"`
	Message string `msgpack:"message"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Grant is one lock a request was granted.
type Grant struct {
	Name   string `msgpack:"name"`
	Mode   Mode   `msgpack:"mode"`
	Weight int    `msgpack:"weight"`
	Token  uint64 `msgpack:"token"`
}

// RequestInfo is the state of an acquire request.
type RequestInfo struct {
	ID       string     `msgpack:"id"`
	Session  SessionID  `msgpack:"session"`
	Key      string     `msgpack:"key,omitempty"`   // the session's key; see PublicID
	Owner    string     `msgpack:"owner,omitempty"` // the ACL token owning the session
	Status   Status     `msgpack:"status"`
	Token    uint64     `msgpack:"token,omitempty"` // largest token among Granted
	Granted  []Grant    `msgpack:"granted,omitempty"`
	Locks    []LockSpec `msgpack:"locks"`
	Seq      uint64     `msgpack:"seq"` // arrival order
	Created  uint64     `msgpack:"created"`
	Ended    uint64     `msgpack:"ended,omitempty"`    // index at which it stopped being pending
	Deadline int64      `msgpack:"deadline,omitempty"` // wait deadline on the table clock
}

// Result is what one command produced.
type Result struct {
	Err      *Error       `msgpack:"err,omitempty"`
	Session  SessionID    `msgpack:"session,omitempty"`  // CreateSession
	Key      string       `msgpack:"key,omitempty"`      // CreateSession: the session's key; see PublicID
	Request  *RequestInfo `msgpack:"request,omitempty"`  // Acquire, Cancel
	Released []string     `msgpack:"released,omitempty"` // Release
	Revoked  []Revocation `msgpack:"revoked,omitempty"`  // Revoke
	Kept     bool         `msgpack:"kept,omitempty"`     // Surrender: nobody waited
	// Proclaimed is the hold a Proclaim left (proclaim.go).
	Proclaimed *Proclamation `msgpack:"proclaimed,omitempty"`
	Events     []Event       `msgpack:"events,omitempty"`
}

// EventKind says what happened to a request, hold or session.
type EventKind uint8

// Event kinds.
const (
	EvGranted     EventKind = iota + 1 // a request was granted (Name is one granted lock)
	EvReleased                         // a hold was fully released by its session
	EvExpired                          // a hold ended by hold_ttl or by its session's expiry
	EvSurrendered                      // a hold was surrendered and its session re-queued
	EvDeadlock                         // a pending request failed as a deadlock victim
	EvCancelled                        // a pending request was cancelled
	EvTimeout                          // a pending request's wait ran out
	EvSessionCreated
	EvSessionClosed
	EvSessionExpired
	EvRevoked    // a hold was revoked by an operator (Revoke)
	EvProclaimed // a hold's value was replaced by its session (Proclaim); its token stays
)

var eventNames = [...]string{"", "granted", "released", "expired", "surrendered", "deadlock",
	"cancelled", "timeout", "session_created", "session_closed", "session_expired", "revoked", "proclaimed"}

// String returns the event kind's name.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && k > 0 {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is one change a command made, so a server can wake exactly the
// waiters and watchers it concerns.
type Event struct {
	Kind      EventKind `msgpack:"kind"`
	Session   SessionID `msgpack:"session"`
	Key       string    `msgpack:"key,omitempty"` // the session's key; see PublicID
	RequestID string    `msgpack:"request_id,omitempty"`
	Name      string    `msgpack:"name,omitempty"`
	Token     uint64    `msgpack:"token,omitempty"`
}
