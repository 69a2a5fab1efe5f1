package lockservice

import (
	"context"
	"errors"
	"fmt"

	"time"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

// CreateSession opens a session and returns its id. It is not repeated
// after an unknown outcome: a second entry would open a second session
// (an orphan expires after its TTL).
func (s *Service) CreateSession(ctx context.Context, cmd *lockstate.CreateSession) (lockstate.SessionID, error) {
	res, _, err := s.propose(ctx, cmd, once)
	if err != nil {
		return 0, err
	}
	return res.Session, nil
}

// Closed is what closing a session gave back.
type Closed struct {
	Released  []string // names whose holds were released
	Cancelled []string // request ids that were pending
}

// CloseSession ends a session cleanly: its holds are released and its
// pending requests cancelled. After an unknown outcome it is repeated, and
// a repeat that finds no session means an earlier attempt closed it (what
// that attempt gave back is then not known: Closed is empty).
func (s *Service) CloseSession(ctx context.Context, id lockstate.SessionID) (Closed, error) {
	cmd := &lockstate.CloseSession{Session: id}
	res, _, err := s.propose(ctx, cmd, once)
	for i := 0; errors.Is(err, raftnode.ErrUnknownOutcome) && i < maxUnknownRetries; i++ {
		res, _, err = s.propose(ctx, cmd, once)
		var refused *lockstate.Error
		if errors.As(err, &refused) && refused.Code == lockstate.CodeNoSession {
			res, err = &lockstate.Result{}, nil
		}
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

// KeepAlive extends a session's deadline on the leader (no log entry) and
// returns its TTL.
func (s *Service) KeepAlive(ctx context.Context, id lockstate.SessionID) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProposeTimeout)
	defer cancel()
	ttl, err := s.node.KeepAlive(ctx, id)
	switch {
	case errors.Is(err, raftnode.ErrSessionNotFound):
		return 0, sessionNotFound(id)
	case err != nil:
		return 0, fmt.Errorf("keepalive of session %d: %w", id, err)
	}
	return ttl, nil
}

func sessionNotFound(id lockstate.SessionID) error {
	return refusal(lockstate.CodeNoSession, "session %d not found", id)
}

// Release gives back one hold of a name, or one hold of every lock a
// request was granted, and returns the names released. It is not
// repeated after an unknown outcome: a second release would count a
// reentrant hold down once too often.
func (s *Service) Release(ctx context.Context, cmd *lockstate.Release) ([]string, error) {
	res, _, err := s.propose(ctx, cmd, once)
	if err != nil {
		return nil, err
	}
	return res.Released, nil
}

// Surrender hands a held lock to its waiters and queues the session
// again behind them; kept is true when nobody waited and the session
// keeps it. Not repeated after an unknown outcome.
func (s *Service) Surrender(ctx context.Context, cmd *lockstate.Surrender) (kept bool, err error) {
	res, _, err := s.propose(ctx, cmd, once)
	if err != nil {
		return false, err
	}
	return res.Kept, nil
}
