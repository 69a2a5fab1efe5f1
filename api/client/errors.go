package client

import (
	"errors"
	"fmt"
)

// Error codes of the lockd HTTP API (docs/api.md).
const (
	CodeInvalidRequest      = "invalid_request"
	CodeUnauthorized        = "unauthorized"
	CodeForbidden           = "forbidden"
	CodeSessionNotFound     = "session_not_found"
	CodeRequestNotFound     = "request_not_found"
	CodeLockNotFound        = "lock_not_found"
	CodeNotFound            = "not_found"
	CodeTimeout             = "timeout"
	CodeDeadlock            = "deadlock"
	CodePoorlyOrderedAccess = "poorly_ordered_access"
	CodeNotHeld             = "not_held"
	CodeLimitMismatch       = "limit_mismatch"
	CodeCancelled           = "cancelled"
	CodeInternal            = "internal"
	CodeNoLeader            = "no_leader"
	CodeLimitExceeded       = "limit_exceeded"
	CodeTokenNotFound       = "token_not_found"
	CodeMemberAlive         = "member_alive"
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

// Sentinels for errors.Is; each matches every *Error with its Code.
var (
	ErrInvalidRequest      = &Error{Code: CodeInvalidRequest, Message: "invalid request"}
	ErrSessionNotFound     = &Error{Code: CodeSessionNotFound, Message: "session not found"}
	ErrRequestNotFound     = &Error{Code: CodeRequestNotFound, Message: "request not found"}
	ErrLockNotFound        = &Error{Code: CodeLockNotFound, Message: "lock not found"}
	ErrTimeout             = &Error{Code: CodeTimeout, Message: "not granted within the wait"}
	ErrDeadlock            = &Error{Code: CodeDeadlock, Message: "chosen as a deadlock victim"}
	ErrPoorlyOrderedAccess = &Error{Code: CodePoorlyOrderedAccess, Message: "ordered session locked out of order"}
	ErrNotHeld             = &Error{Code: CodeNotHeld, Message: "not held by this session"}
	ErrLimitMismatch       = &Error{Code: CodeLimitMismatch, Message: "semaphore limit mismatch"}
	ErrCancelled           = &Error{Code: CodeCancelled, Message: "request cancelled"}
	ErrInternal            = &Error{Code: CodeInternal, Message: "internal server error"}
	ErrNoLeader            = &Error{Code: CodeNoLeader, Message: "no leader reachable"}
	ErrUnauthorized        = &Error{Code: CodeUnauthorized, Message: "no valid token (LOCKD_TOKEN, WithToken)"}
	ErrForbidden           = &Error{Code: CodeForbidden, Message: "the token does not allow it"}
	ErrLimitExceeded       = &Error{Code: CodeLimitExceeded, Message: "a configured limit refused it"}
	ErrTokenNotFound       = &Error{Code: CodeTokenNotFound, Message: "token not found"}
	ErrMemberAlive         = &Error{Code: CodeMemberAlive, Message: "the member is alive: make it leave, or stop it first"}

	// ErrLocked is what TryLock returns when the lock is not free right
	// now. It is ErrTimeout under a friendlier name (a wait of 0 that
	// ran out), so errors.Is matches either.
	ErrLocked = ErrTimeout
)

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
