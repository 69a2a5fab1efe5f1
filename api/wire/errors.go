package wire

import "net/http"

// The error codes of the API: every code an error answer
// ({"error":{"code":...}}) carries. ErrorCodes says the HTTP status each is
// answered with and what it means; docs/api.md's error table is the same
// list. The lock table's codes (lockstate.Code) are the same strings: the
// table speaks the API's vocabulary without importing it.
const (
	CodeInvalidRequest      = "invalid_request"
	CodeUnauthorized        = "unauthorized"
	CodeForbidden           = "forbidden"
	CodeSessionNotFound     = "session_not_found"
	CodeTokenNotFound       = "token_not_found"
	CodeRequestNotFound     = "request_not_found"
	CodeLockNotFound        = "lock_not_found"
	CodeNotFound            = "not_found"
	CodeTimeout             = "timeout"
	CodeDeadlock            = "deadlock"
	CodePoorlyOrderedAccess = "poorly_ordered_access"
	CodeNotHeld             = "not_held"
	CodeLimitMismatch       = "limit_mismatch"
	CodeCancelled           = "cancelled"
	CodeMemberAlive         = "member_alive"
	CodeLimitExceeded       = "limit_exceeded"
	CodeInternal            = "internal"
	CodeDiverged            = "diverged"
	CodeNoLeader            = "no_leader"
)

// ErrorCode is one error code of the API and how it is answered.
type ErrorCode struct {
	Code    string `json:"code"`
	Status  int    `json:"status"`  // the HTTP status of its answers
	Meaning string `json:"meaning"` // one line, for humans
	// Retry: the node that answered could not serve the request, which
	// says nothing of the cluster: a client sends it again, to another
	// node or later, when the request is safe to repeat (an acquire with
	// its request_id, a read; anything when the answer says
	// not_applied). Every other code is the cluster's answer to the
	// request itself: sending it again gets the same one.
	Retry bool `json:"retry"`
}

// errorCodes is ErrorCodes' list, in docs/api.md's order: by status. A
// code answered with two statuses has an entry for each, the usual one
// first.
var errorCodes = []ErrorCode{
	{CodeInvalidRequest, http.StatusBadRequest, "malformed or invalid request: the body, a name, mode, weight, limit, duration or id", false},
	{CodeUnauthorized, http.StatusUnauthorized, "no token, or a token that does not exist, while ACLs are on", false},
	{CodeForbidden, http.StatusForbidden, "the token, or the client certificate, does not allow it", false},
	{CodeSessionNotFound, http.StatusNotFound, "no such session (never made, closed or expired): its locks are lost", false},
	{CodeTokenNotFound, http.StatusNotFound, "no such ACL token", false},
	{CodeRequestNotFound, http.StatusNotFound, "no such acquire request (never made, or forgotten)", false},
	{CodeLockNotFound, http.StatusNotFound, "nobody holds, waits for or delays the name", false},
	{CodeNotFound, http.StatusNotFound, "no such endpoint", false},
	{CodeTimeout, http.StatusConflict, "not granted within the wait (wait 0: not free now)", false},
	{CodeDeadlock, http.StatusConflict, "the request was chosen as a deadlock victim", false},
	{CodePoorlyOrderedAccess, http.StatusConflict, "an ordered session asked for a name out of order", false},
	{CodeNotHeld, http.StatusConflict, "release or surrender of something the session does not hold", false},
	{CodeLimitMismatch, http.StatusConflict, "the semaphore limit disagrees with the name's", false},
	{CodeCancelled, http.StatusConflict, "the acquire was cancelled while it waited", false},
	{CodeMemberAlive, http.StatusConflict, "the member to remove is alive: make it leave, or stop it first", false},
	{CodeInvalidRequest, http.StatusUnsupportedMediaType, "a request body that is not Content-Type: application/json", false},
	{CodeLimitExceeded, http.StatusTooManyRequests, "a configured limit refused it; the message names the limit", false},
	{CodeInternal, http.StatusInternalServerError, "a bug, or a write applied whose answer was lost: do not repeat it", false},
	{CodeDiverged, http.StatusServiceUnavailable, "this node's table diverged from the leader's: ask another node", true},
	{CodeNoLeader, http.StatusServiceUnavailable, "no leader reachable, or the outcome of a write is unknown", true},
}

// ErrorCodes returns every error code of the API, in docs/api.md's order
// (by status); a code answered with more than one status is listed once
// for each, the usual status first.
func ErrorCodes() []ErrorCode {
	return append([]ErrorCode(nil), errorCodes...)
}

// LookupError returns code's entry (the one of its usual status).
func LookupError(code string) (ErrorCode, bool) {
	for _, e := range errorCodes {
		if e.Code == code {
			return e, true
		}
	}
	return ErrorCode{}, false
}
