package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// Error is a failure with the HTTP status it is answered with.
type Error struct {
	Status  int
	Code    string
	Message string
	// NotApplied: the request certainly did nothing (ErrorDetail).
	NotApplied bool
	// QuorumLost: this node reaches fewer voters than a majority
	// (ErrorDetail), so no leader can be elected on its side.
	QuorumLost bool
	// RetryAfter, when set, is the answer's Retry-After in seconds: the
	// node refused the request for load, at once, and asks the client to
	// come back after it (the clients add jitter).
	RetryAfter int
}

// retryAfter is the Retry-After of a refusal for load (429, and the 503
// of a node with too many calls waiting for a leader): about an
// election, the time after which a new leader usually serves.
const retryAfter = 1

// Error returns the code and message.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// errorf is an answer of code, with the HTTP status the API's list of
// codes (wire.ErrorCodes) gives it: the one place a code gets its status.
func errorf(code, format string, args ...any) *Error {
	return &Error{Status: statusOf(code), Code: code, Message: fmt.Sprintf(format, args...)}
}

// statusOf is code's usual HTTP status (wire.ErrorCodes). A code the list
// does not know can only be a newer table's: still a refusal of this
// request, 409.
func statusOf(code string) int {
	if e, ok := wire.LookupError(code); ok {
		return e.Status
	}
	return http.StatusConflict
}

// invalid is the 400 every validation failure answers.
func invalid(format string, args ...any) *Error {
	return errorf(wire.CodeInvalidRequest, format, args...)
}

// notJSON is the 415 invalid_request of a body that is not JSON: the
// code's second status in wire.ErrorCodes.
func notJSON(format string, args ...any) *Error {
	e := invalid(format, args...)
	e.Status = http.StatusUnsupportedMediaType
	return e
}

// noLeader is the 503 a client retries on.
func noLeader(format string, args ...any) *Error {
	return errorf(wire.CodeNoLeader, format, args...)
}

// memberAlive is the 409 of a removal the leader refused because the
// member is alive (lockservice.ErrMemberAlive): it must leave, or be
// stopped and then removed.
func memberAlive(id string) *Error {
	return errorf(wire.CodeMemberAlive, "%[1]s is alive as the leader's gossip sees it, "+
		"and the leader would add it back: make it leave with `lockd leave` on %[1]s (or `lockctl member leave %[1]s`), "+
		"or stop it and remove it once the cluster sees it dead (within about 10 s); nothing was removed", id)
}

// tableError converts a domain failure from the table: its code is one
// of the API's (wire.ErrorCodes).
func tableError(e *lockstate.Error) *Error {
	msg := e.Message
	if e.Code == lockstate.CodeNoSession {
		// One answer for a session that does not exist and one of
		// another token's, whichever check found it.
		msg = "session not found"
	}
	return &Error{Status: statusOf(string(e.Code)), Code: string(e.Code), Message: msg}
}

// leaderless is why a node has no leader to offer, as it sees it.
type leaderless struct {
	why string // one sentence for users
	// quorumLost: fewer voters are reachable than a majority.
	quorumLost bool
}

// toError is the one place that decides how a failure is answered. Its
// messages are for users: the error's chain (Go types, package prefixes)
// goes to the log, not into them. view says why there is no leader, as
// this node sees it.
func toError(err error, view func() leaderless) *Error {
	var ae *Error
	var le *lockstate.Error
	var mbe *http.MaxBytesError
	var re *lockservice.RetryError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &le):
		return tableError(le)
	case errors.As(err, &mbe):
		return invalid("request body is larger than %d bytes", mbe.Limit)
	case errors.As(err, &re):
		return retryRequest(re, view)
	case errors.Is(err, lockservice.ErrAnswerLost): // before unknown outcome: a retry may have joined it
		return errorf(wire.CodeInternal, "the write was applied, but the leader's answer "+
			"did not reach this node; do not repeat it; read the state (GET /v1/sessions/{id}, GET /v1/locks) to see its effect")
	case errors.Is(err, lockservice.ErrUnknownOutcome):
		// Not every write is safe to repeat: say which are.
		const unknown = "it may have been applied. " +
			"An acquire or cancel may be repeated with the same request_id (or re-attach with GET /v1/requests/{id}), a proclaim as it is; " +
			"check GET /v1/sessions/{id} before repeating a release or surrender"
		if v := view(); v.quorumLost {
			// Cut short when the quorum was lost (the leader stopped
			// answering while the write was in flight): say so.
			e := noLeader("%s; the outcome of the write is unknown: %s", v.why, unknown)
			e.QuorumLost = true
			return e
		}
		return noLeader("the outcome of the write is unknown (leadership changed): %s", unknown)
	case errors.Is(err, lockservice.ErrBusy):
		e := noLeader("this node already holds the most requests that may wait to reach a leader (--max-leader-waits): " +
			"nothing was done, retry after the Retry-After")
		e.NotApplied, e.RetryAfter = true, retryAfter
		return e
	case errors.Is(err, lockservice.ErrNoLeader):
		// Only raised before any leader took the command (leaderCall):
		// nothing was done.
		v := view()
		e := noLeader("%s; nothing was done, retry", v.why)
		e.NotApplied, e.QuorumLost = true, v.quorumLost
		return e
	case errors.Is(err, context.DeadlineExceeded):
		v := view()
		e := noLeader("%s; retry", v.why)
		e.QuorumLost = v.quorumLost
		return e
	case errors.Is(err, context.Canceled):
		return noLeader("request cancelled")
	}
	return errorf(wire.CodeInternal, "%v", err)
}

// noLeaderView says why this node has no leader to offer: how many voters
// of the raft configuration it reaches (itself included) and the majority
// a leader needs, and whether its quorum is lost, as raftnode judges them
// (Node.Quorum): from raft's own contact with each voter, not gossip
// alone.
func (s *Server) noLeaderView() leaderless {
	q := s.node.Quorum()
	switch reachable := strings.Join(q.Reachable, ", "); {
	case q.Voters == 0:
		return leaderless{why: "no leader: this node is in no cluster yet (it waits for --bootstrap-expect nodes, or to be added by a leader)"}
	case q.Lost:
		return leaderless{why: fmt.Sprintf("no leader: %d of %d voters reachable (%s); a majority of %d is needed",
			len(q.Reachable), q.Voters, reachable, q.Needed), quorumLost: true}
	default:
		return leaderless{why: fmt.Sprintf("no leader yet: %d of %d voters reachable (%s), electing one",
			len(q.Reachable), q.Voters, reachable)}
	}
}

// retryRequest is the 503 of a request whose outcome this node cannot
// give: the client repeats it with the same request_id, or re-attaches.
func retryRequest(re *lockservice.RetryError, view func() leaderless) *Error {
	cause := toError(re.Err, view)
	var e *Error
	switch {
	case re.Pending:
		e = noLeader("request %s is still pending: %s; re-attach with GET /v1/requests/%s?wait=30s",
			re.RequestID, cause.Message, re.RequestID)
	case cause.Code != wire.CodeNoLeader:
		return cause
	default:
		e = noLeader("request %s: %s; retry with the same request_id, or re-attach with GET /v1/requests/%s?wait=30s",
			re.RequestID, cause.Message, re.RequestID)
	}
	e.QuorumLost, e.RetryAfter = cause.QuorumLost, cause.RetryAfter
	return e
}

// writeError answers err as {"error":{"code","message"}}.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toError(err, s.noLeaderView)
	s.denied(r, e)
	var refused *lockstate.Error
	if errors.As(err, &refused) && refused.Code == lockstate.CodeLimit {
		s.limits.refusals.WithLabelValues("table").Inc()
	}
	if e.Status == http.StatusTooManyRequests && e.RetryAfter == 0 {
		e.RetryAfter = retryAfter // a limit may free up (a session expires, a wait ends)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		if e.Status == http.StatusServiceUnavailable {
			s.limits.refusals.WithLabelValues("leader_waits").Inc()
		}
	}
	if e.Status >= 500 && e.RetryAfter == 0 {
		// (One shed from a herd is counted, not logged line by line.)
		s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "message", e.Message, "error", err)
	}
	writeJSON(w, e.Status, wire.ErrorBody{Error: wire.ErrorDetail{Code: e.Code, Message: e.Message,
		NotApplied: e.NotApplied, QuorumLost: e.QuorumLost}})
}
