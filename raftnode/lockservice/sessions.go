package lockservice

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

// CreateSession opens a session owned by the caller and returns its
// table id and its public id (the key the leader drew). It is not
// repeated after an unknown outcome: a second entry would open a second
// session (an orphan expires after its TTL).
func (s *Service) CreateSession(ctx context.Context, cmd *lockstate.CreateSession) (lockstate.SessionID, string, error) {
	cmd.Key, cmd.Limits = "", nil // the leader's to fill in
	res, _, err := s.propose(ctx, cmd, once)
	if err != nil {
		return 0, "", err
	}
	return res.Session, lockstate.PublicID(res.Session, res.Key), nil
}

// Closed is what closing a session gave back.
type Closed struct {
	Released  []string // names whose holds were released
	Cancelled []string // request ids that were pending
}

// CloseSession ends a session cleanly: its holds are released and its
// pending requests cancelled. After an unknown outcome it is repeated; a
// repeat refused for no session means an earlier attempt closed it only
// when a read then finds the session gone (what that attempt gave back is
// not known: Closed is empty) and the caller may close it at all: another
// token's close is refused, even once the owner closed the session
// meanwhile.
func (s *Service) CloseSession(ctx context.Context, session string) (Closed, error) {
	id, err := s.resolveSession(ctx, session)
	if err != nil {
		return Closed{}, err
	}
	var mayClose bool // as the table judges an attempt: a session's owner never changes
	s.fsm.Read(func(t *lockstate.Table) { mayClose = t.MayUse(callerOf(ctx).TokenID, id) == nil })
	cmd := &lockstate.CloseSession{Session: id}
	res, _, err := s.propose(ctx, cmd, once)
	unknown := false // an attempt may have closed it
	for i := 0; errors.Is(err, raftnode.ErrUnknownOutcome) && i < maxUnknownRetries; i++ {
		unknown = true
		res, _, err = s.propose(ctx, cmd, once)
		var refused *lockstate.Error
		if errors.As(err, &refused) && refused.Code == lockstate.CodeNoSession {
			switch there, rerr := s.sessionThere(ctx, id); {
			case rerr != nil: // the doubt stays
			case there || !mayClose:
				unknown = false // no attempt closed it: the refusal is the answer
			default:
				res, err = &lockstate.Result{}, nil
			}
		}
	}
	if err != nil && unknown && !errors.Is(err, raftnode.ErrUnknownOutcome) {
		// A later attempt that did nothing does not undo the doubt of an
		// earlier one: the answer must not say "not applied".
		err = fmt.Errorf("%w: %w", raftnode.ErrUnknownOutcome, err)
	}
	if err != nil {
		return Closed{}, err
	}
	out := Closed{Released: []string{}, Cancelled: []string{}}
	for _, ev := range res.Events {
		switch {
		case ev.Session != id:
		case ev.Kind == lockstate.EvReleased:
			out.Released = append(out.Released, ev.Name)
		case ev.Kind == lockstate.EvCancelled:
			out.Cancelled = append(out.Cancelled, ev.RequestID)
		}
	}
	return out, nil
}

// sessionThere reports whether session id is in the table, after a
// read-index. The table answers "no session" to a close of another
// token's session too: a repeated close that hears it closed the session
// in an earlier attempt only if the session is gone.
func (s *Service) sessionThere(ctx context.Context, id lockstate.SessionID) (bool, error) {
	if err := s.catchUp(ctx, Linearizable); err != nil {
		return false, err
	}
	var there bool
	s.fsm.Read(func(t *lockstate.Table) { there = t.HasSession(id) })
	return there, nil
}

// Alive is what a keepalive gives back: the session's TTL and the holds
// an operator revoked from it lately, so that its client learns it lost
// them.
type Alive struct {
	TTL     time.Duration
	Revoked []lockstate.Revocation
}

// KeepAlive extends a session's deadline on the leader (no log entry).
// Only the session's owner or a management token may; with ACLs on, the
// owner is checked after a read-index, so a token deleted before the
// keepalive began is refused.
func (s *Service) KeepAlive(ctx context.Context, session string) (Alive, error) {
	kept, err := s.KeepAliveMany(ctx, []string{session})
	if err != nil {
		return Alive{}, err
	}
	return kept[0].Alive, kept[0].Err
}

// Kept is one session's part of a batched keepalive: what a keepalive
// of it alone would have given back, or the refusal it would have got.
type Kept struct {
	Session string // the key it was named by
	Alive
	Err error // session_not_found, unauthorized, forbidden, invalid_request
}

// KeepAliveMany extends several sessions' deadlines on the leader with
// one leadership check (and, with ACLs on, one read-index): what
// KeepAlive does for each, for a client that keeps many sessions. A
// session the caller may not use, or that is gone, is refused in its own
// Kept; an error (no leader) is the whole batch's.
func (s *Service) KeepAliveMany(ctx context.Context, sessions []string) ([]Kept, error) {
	if len(sessions) > raftnode.MaxKeepAliveBatch {
		return nil, refusal(lockstate.CodeInvalid, "%d sessions in one keepalive, at most %d", len(sessions), raftnode.MaxKeepAliveBatch)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProposeTimeout)
	defer cancel()
	out := make([]Kept, len(sessions))
	ids, err := s.resolveUsable(ctx, sessions, out)
	if err != nil {
		return nil, err
	}
	var live []lockstate.SessionID // the ids of out's sessions not refused yet, in order
	for i := range out {
		if out[i].Err == nil {
			live = append(live, ids[i])
		}
	}
	if len(live) == 0 {
		return out, nil
	}
	ttls, err := s.node.KeepAliveMany(ctx, live)
	if err != nil {
		return nil, fmt.Errorf("keepalive of %d sessions: %w", len(live), err)
	}
	s.fsm.Read(func(t *lockstate.Table) {
		j := 0
		for i := range out {
			if out[i].Err != nil {
				continue
			}
			out[i].Alive = Alive{TTL: ttls[j], Revoked: []lockstate.Revocation{}}
			if ttls[j] == 0 {
				out[i].Err = sessionNotFound(ids[i])
			} else if info, ok := t.Session(ids[i]); ok {
				out[i].Revoked = info.Revoked
			}
			j++
		}
	})
	return out, nil
}

// resolveUsable sets out[i].Session and returns the table id of each
// session key; a key that names no session, or a session the caller may
// not use, is refused in out[i].Err. One read-index serves them all.
func (s *Service) resolveUsable(ctx context.Context, keys []string, out []Kept) ([]lockstate.SessionID, error) {
	ids, found, err := s.sessionIDs(ctx, keys)
	if err != nil {
		return nil, err
	}
	for i, key := range keys {
		out[i].Session, out[i].Err = key, keyRefusal(key, found[i])
	}
	if !slices.Contains(found, true) {
		return ids, nil
	}
	refused, err := s.mayUseAll(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Err == nil {
			out[i].Err = refused[i]
		}
	}
	return ids, nil
}

// mayUseAll checks which of sessions ids the caller may act through:
// refused[i] says why not ids[i]; err (no token, no read-index) holds for
// all. With ACLs on, the owners are checked after one read-index, so a
// token deleted before the call began is refused.
func (s *Service) mayUseAll(ctx context.Context, ids []lockstate.SessionID) (refused []error, err error) {
	refused = make([]error, len(ids))
	auth := callerOf(ctx).TokenID
	if auth == "" && !s.cfg.ACL && !s.Bootstrapped() {
		return refused, nil
	}
	if auth == "" {
		return nil, refusal(lockstate.CodeUnauthorized, "a token is required (Authorization: Bearer <secret>)")
	}
	if err := s.catchUp(ctx, Linearizable); err != nil {
		return nil, err
	}
	s.fsm.Read(func(t *lockstate.Table) {
		for i, id := range ids {
			if r := t.MayUse(auth, id); r != nil {
				refused[i] = r
			}
		}
	})
	return refused, nil
}

func sessionNotFound(id lockstate.SessionID) error {
	return refusal(lockstate.CodeNoSession, "session not found")
}

// Release gives back one hold of a name, or one hold of every lock a
// request was granted, and returns the names released. It is not
// repeated after an unknown outcome: a second release would count a
// reentrant hold down once too often. cmd.Session is set from session,
// the session's key.
func (s *Service) Release(ctx context.Context, session string, cmd *lockstate.Release) ([]string, error) {
	id, err := s.resolveSession(ctx, session)
	if err != nil {
		return nil, err
	}
	cmd.Session = id
	res, _, err := s.propose(ctx, cmd, once)
	if err != nil {
		return nil, err
	}
	return res.Released, nil
}

// Surrender hands a held lock to its waiters and queues the session
// again behind them; kept is true when nobody waited and the session
// keeps it. Not repeated after an unknown outcome. cmd.Session is set
// from session, the session's key.
func (s *Service) Surrender(ctx context.Context, session string, cmd *lockstate.Surrender) (kept bool, err error) {
	id, err := s.resolveSession(ctx, session)
	if err != nil {
		return false, err
	}
	cmd.Session = id
	res, _, err := s.propose(ctx, cmd, once)
	if err != nil {
		return false, err
	}
	return res.Kept, nil
}
