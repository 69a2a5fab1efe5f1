package lockservice

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// Acquire proposes cmd and returns the request once granted, waiting on
// this node while it is pending. Any other outcome is an error: a
// *lockstate.Error whose code says why it was not granted (timeout,
// deadlock, cancelled, not_held for a grant already given back,
// session_not_found when its session ended meanwhile, or the table's
// refusal), or a *RetryError naming the request to retry or re-attach to.
//
// Acquire asks for cmd's locks for the session whose key is session
// (cmd.Session is set from it). It caps cmd.Wait at MaxWait and fills in
// cmd.RequestID when it is empty: chosen here, not by the table, so that a
// proposal repeated after an unknown outcome is the same request. A
// session that cannot be looked up for want of a leader is a
// *RetryError when the client chose the request id: nothing was proposed.
//
// The table's own deadline (fired by the leader's ticks) ends a wait with
// "timeout". Only when no leader is there to do so does this node,
// CancelGrace after the wait, propose a cancel — whose committed result is
// the answer: a grant that won the race is answered as granted.
func (s *Service) Acquire(ctx context.Context, session string, cmd *lockstate.Acquire) (*lockstate.RequestInfo, error) {
	id, err := s.resolveSession(ctx, session)
	if err != nil && cmd.RequestID != "" && errors.Is(err, ErrNoLeader) {
		return nil, &RetryError{RequestID: cmd.RequestID, Err: err}
	}
	if err != nil {
		return nil, err
	}
	cmd.Session = id
	if err := cmd.Validate(); err != nil {
		return nil, err // before capping: a wait over the table's maximum is refused, not shortened
	}
	cmd.Wait = min(cmd.Wait, s.cfg.MaxWait)
	if cmd.RequestID == "" {
		cmd.RequestID = "r-" + rand.Text()
	}
	res, index, err := s.propose(ctx, cmd, idempotent)
	switch {
	case err != nil && unavailable(err):
		return nil, &RetryError{RequestID: cmd.RequestID, Err: err}
	case err != nil:
		return nil, err
	case res.Request.Status != lockstate.Pending:
		return s.final(ctx, res.Request, index, false)
	}
	return s.follow(ctx, res.Request, index, cmd.Wait)
}

// follow waits for a pending request whose entry is at index: once this
// node has applied that entry too, in its own table, and at the same time
// on the leader (askLeader), whichever answers first. The table's
// deadline counts from the proposal, so this node's own limit (wait +
// grace) starts now.
func (s *Service) follow(ctx context.Context, info *lockstate.RequestInfo, index uint64, wait time.Duration) (*lockstate.RequestInfo, error) {
	waitCtx, cancel := s.waitContext(ctx)
	defer cancel()
	until := time.Now().Add(wait + s.cfg.CancelGrace)
	localCtx, leaderAnswer := s.askLeader(waitCtx, info, time.Until(until))
	st, end := s.followLocal(localCtx, info, index, until)
	if got := leaderAnswer(); got != nil {
		// The leader may be ahead of this node: explaining a refusal reads
		// the local table as of the entry that ended the request.
		return s.final(ctx, got, max(index, got.Ended), false)
	}
	switch {
	case end == waitAborted:
		return nil, stillPending(info.ID, errStoppedWaiting)
	case end == waitTimedOut:
		return s.cancelPending(ctx, info)
	case !st.found:
		return nil, requestGone(info.ID, lockstate.PublicID(info.Session, info.Key), st.sessionLive)
	}
	return s.final(ctx, &st.info, index, false)
}

// followLocal waits until this node has applied index, then until the
// request is no longer pending in its table. A node that cannot apply
// index in time (it lags too far behind, or its FSM stopped) reports
// waitTimedOut: the log decides, by a cancel.
func (s *Service) followLocal(ctx context.Context, info *lockstate.RequestInfo, index uint64, until time.Time) (requestState, waitEnd) {
	appliedCtx, cancel := context.WithDeadline(ctx, until)
	err := s.fsm.WaitApplied(appliedCtx, index)
	cancel()
	switch {
	case ctx.Err() != nil:
		return requestState{}, waitAborted
	case err != nil:
		return requestState{}, waitTimedOut
	}
	return s.awaitRequest(ctx, info.ID, info.Session, until)
}

// cancelPending ends a request still pending after its wait: the cancel's
// committed result decides.
func (s *Service) cancelPending(ctx context.Context, info *lockstate.RequestInfo) (*lockstate.RequestInfo, error) {
	res, index, err := s.propose(ctx, &lockstate.Cancel{Session: info.Session, RequestID: info.ID}, idempotent)
	var refused *lockstate.Error
	switch {
	case errors.As(err, &refused) && refused.Code == lockstate.CodeNoRequest:
		s.waitApplied(ctx, index) // the session's state as of the cancel
		return nil, requestGone(info.ID, lockstate.PublicID(info.Session, info.Key), s.hasSession(info.Session))
	case err != nil:
		return nil, stillPending(info.ID, fmt.Errorf("no leader could decide it after its wait: %w", err))
	}
	return s.final(ctx, res.Request, index, true)
}

// requestGone is the error of a request the table no longer knows: its
// session was closed or expired (which forgets its requests), or it was
// forgotten.
func requestGone(id, sess string, sessionLive bool) error {
	if !sessionLive {
		return refusal(lockstate.CodeNoSession, "session %s was closed or expired while request %s waited", sess, id)
	}
	return refusal(lockstate.CodeNoRequest, "request %s not found", id)
}

// final turns a request that is no longer pending into Acquire's answer.
// index is the entry the state comes from; cancelledHere says this node
// proposed the cancel that ended it because the wait was over.
func (s *Service) final(ctx context.Context, info *lockstate.RequestInfo, index uint64, cancelledHere bool) (*lockstate.RequestInfo, error) {
	switch info.Status {
	case lockstate.Granted:
		return info, nil
	case lockstate.TimedOut:
		return nil, refusal(lockstate.CodeTimeout, "request %s not granted within its wait: %s",
			info.ID, s.blocking(ctx, info.Locks, index))
	case lockstate.Deadlock:
		return nil, refusal(lockstate.CodeDeadlock,
			"request %s was chosen as a deadlock victim (session %s is the youngest in the cycle)", info.ID, lockstate.PublicID(info.Session, info.Key))
	case lockstate.Cancelled:
		return nil, s.cancelled(ctx, info, index, cancelledHere)
	case lockstate.Released:
		return nil, refusal(lockstate.CodeNotHeld,
			"request %s was granted (token %d) but its session no longer holds it (released, expired or surrendered)", info.ID, info.Token)
	}
	return nil, fmt.Errorf("request %s: unexpected status %q", info.ID, info.Status)
}

// cancelled explains a cancelled request: after this node's own cancel
// (the cancel that committed may be an earlier attempt of its own whose
// answer was lost) it was not granted within its wait; otherwise its
// session ended, or somebody cancelled it.
func (s *Service) cancelled(ctx context.Context, info *lockstate.RequestInfo, index uint64, cancelledHere bool) error {
	s.waitApplied(ctx, index) // the session's state as of the answer
	switch {
	case cancelledHere:
		return refusal(lockstate.CodeTimeout, "request %s not granted within its wait (cancelled): %s",
			info.ID, s.blocking(ctx, info.Locks, index))
	case !s.hasSession(info.Session):
		return requestGone(info.ID, lockstate.PublicID(info.Session, info.Key), false)
	}
	return refusal(CodeCancelled, "request %s was cancelled", info.ID)
}

// Request returns the state of the request that id names for the
// caller, of the session whose key is session unless that is "": the
// table's rule (lockstate.Table.FindRequest) finds the caller's own (a
// management token's, or without ACLs anyone's); another token's with
// the same id is request_not_found as if it did not exist, and several of
// the caller's own are invalid_request until it names the session. With
// wait > 0 it long-polls that request: it answers once the request is no
// longer pending, or when wait (capped at MaxWait) runs out, with the
// state then. A long-poll only reads: the table's deadline ends a pending
// request once a leader ticks, so re-attaching never needs to decide
// anything.
func (s *Service) Request(ctx context.Context, c Consistency, session, id string, wait time.Duration) (*lockstate.RequestInfo, error) {
	if err := s.catchUp(ctx, c); err != nil {
		return nil, err
	}
	var sess lockstate.SessionID
	if session != "" {
		var err error
		if sess, err = s.resolveSession(ctx, session); err != nil {
			return nil, err
		}
	}
	found, err := s.findRequest(ctx, sess, id)
	if err != nil {
		return nil, err
	}
	// The wait follows that one request, by its session and id: another
	// session's request with the id, made meanwhile, is never the answer.
	st, end := s.awaitRequest(ctx, id, found.Session, time.Now().Add(min(wait, s.cfg.MaxWait)))
	switch {
	case !st.found: // forgotten meanwhile, with its session
		return nil, requestNotFound(id)
	case end == waitAborted && st.info.Status == lockstate.Pending:
		return nil, stillPending(id, errStoppedWaiting)
	}
	return &st.info, nil
}

// findRequest returns the request id names for the caller in this node's
// table, narrowed to session unless it is 0 (lockstate.Table.FindRequest).
func (s *Service) findRequest(ctx context.Context, session lockstate.SessionID, id string) (lockstate.RequestInfo, error) {
	var info lockstate.RequestInfo
	err := s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		auth := ""
		if tok != nil {
			auth = tok.ID
		}
		var refused *lockstate.Error
		if info, refused = t.FindRequest(auth, session, id); refused != nil {
			return refused
		}
		return nil
	})
	return info, err
}

// requestNotFound is the refusal of a request that does not exist, or is
// another token's: the same words.
func requestNotFound(id string) error {
	return refusal(lockstate.CodeNoRequest, "request %q not found", id)
}

// Cancel withdraws a pending request of the session whose key is session
// ("" for any session) and returns its state; one granted meanwhile stays
// granted. Repeating it is harmless: a repeat returns the state.
func (s *Service) Cancel(ctx context.Context, session string, cmd *lockstate.Cancel) (*lockstate.RequestInfo, error) {
	if session != "" {
		id, err := s.resolveSession(ctx, session)
		if err != nil {
			return nil, err
		}
		cmd.Session = id
	}
	res, _, err := s.propose(ctx, cmd, idempotent)
	if err != nil {
		return nil, err
	}
	return res.Request, nil
}
