package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// Error is an error answer of the lockd API, or an error of this client
// that carries an API code (such as a session lost by missed keepalives).
// Compare with the sentinels using errors.Is: an Error matches every
// sentinel with the same Code.
type Error struct {
	Code       string // API error code, e.g. "timeout"
	Message    string // human-readable detail from the server
	HTTPStatus int    // 0 when the error was not an HTTP answer
	// NotApplied: the server says it did nothing with the request (a
	// 503 before any leader took it), so it may be sent again.
	NotApplied bool
	// QuorumLost: the node that answered no_leader reaches fewer voters
	// than a majority, so it cannot elect a leader. A call returns such
	// an answer at once when every node it could reach gave it.
	QuorumLost bool
	// RetryAfter is the answer's Retry-After (0 without one): the node
	// refused the request for load (a 429, or the 503 of a node with too
	// many calls waiting for a leader). A retried call waits at least
	// this long, plus jitter, before its next attempt.
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string {
	if e.HTTPStatus == 0 {
		return fmt.Sprintf("lockd: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("lockd: %s (HTTP %d): %s", e.Code, e.HTTPStatus, e.Message)
}

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, client.ErrTimeout) works for any timeout answer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is, one for each code of the API (wire.ErrorCodes,
// where each code's HTTP status and meaning are listed); each matches
// every *Error with its code.
var (
	ErrInvalidRequest      = sentinel(wire.CodeInvalidRequest)
	ErrUnauthorized        = sentinel(wire.CodeUnauthorized)
	ErrForbidden           = sentinel(wire.CodeForbidden)
	ErrSessionNotFound     = sentinel(wire.CodeSessionNotFound)
	ErrTokenNotFound       = sentinel(wire.CodeTokenNotFound)
	ErrRequestNotFound     = sentinel(wire.CodeRequestNotFound)
	ErrLockNotFound        = sentinel(wire.CodeLockNotFound)
	ErrNotFound            = sentinel(wire.CodeNotFound) // no such endpoint: a node older than this client
	ErrTimeout             = sentinel(wire.CodeTimeout)
	ErrDeadlock            = sentinel(wire.CodeDeadlock)
	ErrPoorlyOrderedAccess = sentinel(wire.CodePoorlyOrderedAccess)
	ErrNotHeld             = sentinel(wire.CodeNotHeld)
	ErrLimitMismatch       = sentinel(wire.CodeLimitMismatch)
	ErrCancelled           = sentinel(wire.CodeCancelled)
	ErrMemberAlive         = sentinel(wire.CodeMemberAlive)
	ErrLimitExceeded       = sentinel(wire.CodeLimitExceeded)
	ErrInternal            = sentinel(wire.CodeInternal)
	ErrDiverged            = sentinel(wire.CodeDiverged)
	ErrNoLeader            = sentinel(wire.CodeNoLeader)

	// ErrLocked is what TryLock returns when the lock is not free right
	// now. It is ErrTimeout under a friendlier name (a wait of 0 that
	// ran out), so errors.Is matches either.
	ErrLocked = ErrTimeout
)

// sentinels are the sentinels by code.
var sentinels = map[string]*Error{}

// sentinel is the sentinel of code, with the list's meaning as its
// message.
func sentinel(code string) *Error {
	e, ok := wire.LookupError(code)
	if !ok {
		panic("lockd client: " + code + " is not an API error code")
	}
	s := &Error{Code: code, Message: e.Meaning}
	sentinels[code] = s
	return s
}

// retryable reports whether an answer of code says only that the node
// could not serve the request (wire.ErrorCode.Retry): another node may.
func retryable(code string) bool {
	e, ok := wire.LookupError(code)
	return ok && e.Retry
}

// ErrUnknownMember: Leave named a node the cluster does not list (or
// whose address answers as another node).
var ErrUnknownMember = errors.New("lockd: no such member")

// ErrSessionClosed is returned by operations on a Session after Close.
var ErrSessionClosed = errors.New("lockd: session closed")

// ErrKeepaliveExpired is Session.Err when no keepalive succeeded for
// longer than the TTL minus the safety margin: the server may already
// have expired the session, so its locks must be treated as lost.
var ErrKeepaliveExpired = errors.New("lockd: no keepalive succeeded within the session TTL")

// ErrUnknownOutcome wraps the error of a non-idempotent call (release,
// surrender) whose request may or may not have been applied: it was sent
// but no answer came back, and this client does not resend it blindly.
var ErrUnknownOutcome = errors.New("lockd: outcome unknown")

// codeOf returns the API code of err, or "".
func codeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
