package api

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// POST /v1/acquire
func (s *Server) acquireJSON(w http.ResponseWriter, r *http.Request) {
	var req AcquireRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd, err := acquireCmd(req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.acquire(w, r, cmd)
}

// acquire proposes a validated acquire and answers its outcome, waiting
// on this node while it is pending.
//
// The wait is capped at MaxWait before it is proposed, so the table's own
// deadline (fired by the leader's ticks) ends it with "timeout". Only when
// no leader is there to do so does this node, CancelGrace after the wait,
// propose a cancel — whose committed result is the answer: a grant that
// won the race is answered "granted".
func (s *Server) acquire(w http.ResponseWriter, r *http.Request, cmd *lockstate.Acquire) {
	cmd.Wait = s.capWait(cmd.Wait)
	if cmd.RequestID == "" {
		// Chosen here, not by the table, so that a proposal retried after
		// an unknown outcome is the same request.
		cmd.RequestID = "r-" + rand.Text()
	}
	res, idx, err := s.propose(r.Context(), cmd, true)
	if err != nil {
		if e := toError(err); e.Code == CodeNoLeader {
			err = noLeader("request %s: %s; retry with the same request_id, or re-attach with GET /v1/requests/%s?wait=30s",
				cmd.RequestID, e.Message, cmd.RequestID)
		}
		s.writeError(w, r, err)
		return
	}
	info := res.Request
	if info.Status != lockstate.Pending {
		s.answerFinal(w, r, info, idx, 0)
		return
	}

	// The entry is applied on the leader; follow it here once this node
	// has applied it too. The table's deadline counts from the proposal,
	// so this node's own limit (wait + grace) starts now.
	ctx, cancel := s.waitContext(r.Context())
	defer cancel()
	until := time.Now().Add(cmd.Wait + s.cfg.CancelGrace)
	actx, acancel := context.WithDeadline(ctx, until)
	err = s.fsm.WaitApplied(actx, idx)
	acancel()
	switch {
	case ctx.Err() != nil:
		s.writeError(w, r, s.stillPending(info.ID, "this node stopped waiting (shutting down or client gone)"))
		return
	case err != nil: // this node lags too far behind to follow the request: let the log decide
		s.cancelPending(w, r, info)
		return
	}
	final, ok, live, end := s.awaitRequest(ctx, info.ID, info.Session, until)
	switch {
	case end == waitAborted:
		s.writeError(w, r, s.stillPending(info.ID, "this node stopped waiting (shutting down or client gone)"))
	case end == waitTimedOut:
		s.cancelPending(w, r, info)
	case !ok:
		s.writeError(w, r, requestGone(info.ID, SessionID(info.Session), live))
	default:
		s.answerFinal(w, r, &final, idx, 0)
	}
}

// cancelPending ends a request still pending after its wait: the cancel's
// committed result decides.
func (s *Server) cancelPending(w http.ResponseWriter, r *http.Request, info *lockstate.RequestInfo) {
	res, idx, err := s.propose(r.Context(), &lockstate.Cancel{Session: info.Session, RequestID: info.ID}, true)
	var le *lockstate.Error
	switch {
	case errors.As(err, &le) && le.Code == lockstate.CodeNoRequest:
		s.waitApplied(r.Context(), idx) // the session's state as of the cancel
		var live bool
		s.fsm.Read(func(t *lockstate.Table) { live = t.HasSession(info.Session) })
		s.writeError(w, r, requestGone(info.ID, SessionID(info.Session), live))
	case err != nil:
		s.writeError(w, r, s.stillPending(info.ID, "no leader could decide it after its wait"))
	default:
		s.answerFinal(w, r, res.Request, idx, idx)
	}
}

// stillPending is the 503 of a request whose outcome this node cannot
// give: the client re-attaches by request id, on any node.
func (s *Server) stillPending(id, why string) error {
	return noLeader("request %s is still pending: %s; re-attach with GET /v1/requests/%s?wait=30s", id, why, id)
}

// requestGone answers a request the table no longer knows: its session
// was closed or expired (which forgets its requests), or it was forgotten.
func requestGone(id string, sess SessionID, sessionLive bool) error {
	if !sessionLive {
		return errorf(http.StatusNotFound, string(lockstate.CodeNoSession),
			"session %s was closed or expired while request %s waited", sess, id)
	}
	return errorf(http.StatusNotFound, string(lockstate.CodeNoRequest), "request %s not found", id)
}

// answerFinal answers a request that is no longer pending. index is the
// entry the state comes from; cancelIndex, when not 0, is the index of the
// cancel this node proposed because the wait was over.
func (s *Server) answerFinal(w http.ResponseWriter, r *http.Request, info *lockstate.RequestInfo, index, cancelIndex uint64) {
	switch info.Status {
	case lockstate.Granted:
		writeJSON(w, http.StatusOK, grantedJSON(info))
	case lockstate.TimedOut:
		s.writeError(w, r, errorf(http.StatusConflict, string(lockstate.CodeTimeout),
			"request %s not granted within its wait: %s", info.ID, s.blockers(r.Context(), info.Locks, index)))
	case lockstate.Deadlock:
		s.writeError(w, r, errorf(http.StatusConflict, string(lockstate.CodeDeadlock),
			"request %s was chosen as a deadlock victim (session %d is the youngest in the cycle)", info.ID, info.Session))
	case lockstate.Cancelled:
		s.waitApplied(r.Context(), index) // the session's state as of the answer
		var live bool
		s.fsm.Read(func(t *lockstate.Table) { live = t.HasSession(info.Session) })
		switch {
		case cancelIndex != 0:
			// This node cancelled because the wait was over; the cancel
			// that committed may be an earlier attempt of its own whose
			// answer was lost. Either way the request was not granted.
			s.writeError(w, r, errorf(http.StatusConflict, string(lockstate.CodeTimeout),
				"request %s not granted within its wait (cancelled): %s", info.ID, s.blockers(r.Context(), info.Locks, index)))
		case !live:
			s.writeError(w, r, requestGone(info.ID, SessionID(info.Session), false))
		default:
			s.writeError(w, r, errorf(http.StatusConflict, CodeCancelled, "request %s was cancelled", info.ID))
		}
	case lockstate.Released:
		s.writeError(w, r, errorf(http.StatusConflict, string(lockstate.CodeNotHeld),
			"request %s was granted (token %d) but its session no longer holds it (released, expired or surrendered)", info.ID, info.Token))
	default:
		s.writeError(w, r, fmt.Errorf("request %s: unexpected status %q", info.ID, info.Status))
	}
}

// blockers says, for a timeout message, who holds what the request wanted,
// from this node's table once it has applied index.
func (s *Server) blockers(ctx context.Context, specs []lockstate.LockSpec, index uint64) string {
	s.waitApplied(ctx, index)
	var parts []string
	s.fsm.Read(func(t *lockstate.Table) {
		for _, sp := range specs {
			parts = append(parts, describeName(t, sp.Name))
		}
	})
	return strings.Join(parts, "; ")
}

// waitApplied waits briefly until this node has applied index, so that a
// local read reflects the entry an answer is about. Best effort: at worst
// a message is slightly stale.
func (s *Server) waitApplied(ctx context.Context, index uint64) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = s.fsm.WaitApplied(ctx, index)
}

// describeName names the holders of name, or of the nearest related name
// that holds it up.
func describeName(t *lockstate.Table, name string) string {
	held := func(li lockstate.LockInfo) string {
		hs := make([]string, 0, len(li.Holders))
		for _, h := range li.Holders {
			hs = append(hs, fmt.Sprintf("session %d (%s, token %d)", h.Session, h.Mode, h.Token))
		}
		return strings.Join(hs, ", ")
	}
	if li, ok := t.Lock(name); ok && len(li.Holders) > 0 {
		return fmt.Sprintf("%s is held by %s", name, held(li))
	}
	for p := name; strings.Contains(p, "/"); {
		p = p[:strings.LastIndexByte(p, '/')]
		if li, ok := t.Lock(p); ok && len(li.Holders) > 0 {
			return fmt.Sprintf("%s is covered by %s, held by %s", name, p, held(li))
		}
	}
	for _, li := range t.Locks(name + "/") {
		if len(li.Holders) > 0 {
			return fmt.Sprintf("%s has %s below it, held by %s", name, li.Name, held(li))
		}
	}
	if li, ok := t.Lock(name); ok && li.DelayedUntil != 0 {
		return fmt.Sprintf("%s is in lock-delay until %s", name, clockTime(li.DelayedUntil).Format(time.RFC3339Nano))
	}
	if li, ok := t.Lock(name); ok && len(li.Waiters) > 0 {
		return fmt.Sprintf("%s has %d earlier waiter(s)", name, len(li.Waiters))
	}
	return fmt.Sprintf("%s is not held now", name)
}

// GET /v1/requests/{id}?wait=30s
func (s *Server) getRequest(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait, err := queryDuration(r.URL.Query(), "wait")
	if err == nil {
		err = s.readIndex(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A long-poll only reads: the table's deadline ends a pending request
	// once a leader ticks, so re-attaching never needs to decide anything.
	info, ok, _, end := s.awaitRequest(r.Context(), id, 0, time.Now().Add(s.capWait(wait)))
	switch {
	case !ok:
		s.writeError(w, r, errorf(http.StatusNotFound, string(lockstate.CodeNoRequest), "request %q not found", id))
	case end == waitAborted && info.Status == lockstate.Pending:
		s.writeError(w, r, s.stillPending(id, "this node stopped waiting (shutting down or client gone)"))
	default:
		writeJSON(w, http.StatusOK, requestJSON(&info))
	}
}

// DELETE /v1/requests/{id}[?session=ID]
func (s *Server) cancelRequest(w http.ResponseWriter, r *http.Request) {
	cmd := &lockstate.Cancel{RequestID: r.PathValue("id")}
	if r.URL.Query().Has("session") {
		id, err := querySession(r.URL.Query())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		cmd.Session = lockstate.SessionID(id)
	}
	res, _, err := s.propose(r.Context(), cmd, true) // idempotent: a repeat returns the state
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, requestJSON(res.Request))
}
