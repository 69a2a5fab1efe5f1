package lockservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

// retry says whether a proposal whose outcome is unknown may be sent
// again: only when repeating it cannot apply it twice.
type retry bool

const (
	// idempotent: an acquire or cancel by request id; a repeat returns the
	// state the first one left.
	idempotent retry = true
	// once: a repeat could apply twice (a release counts a hold down, a
	// session create opens another session).
	once retry = false
)

// propose validates cmd, commits it and returns the table's result,
// turning a refusal into its *lockstate.Error. raftnode already waits out
// an election; a proposal whose outcome is unknown is sent again here
// only when idempotent.
func (s *Service) propose(ctx context.Context, cmd lockstate.Command, r retry) (*lockstate.Result, uint64, error) {
	if err := s.withAuth(ctx, cmd); err != nil {
		return nil, 0, err
	}
	if err := cmd.Validate(); err != nil {
		return nil, 0, err // costs no log entry; apply runs the same check
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProposeTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		res, index, err := s.node.Propose(ctx, cmd)
		switch {
		case err == nil && res == nil:
			return nil, index, fmt.Errorf("propose %T: no result at index %d", cmd, index)
		case err == nil && res.Err != nil:
			return res, index, res.Err
		case err == nil:
			return res, index, nil
		case !errors.Is(err, raftnode.ErrUnknownOutcome) || r == once || attempt == maxUnknownRetries:
			if attempt > 0 && !errors.Is(err, raftnode.ErrUnknownOutcome) {
				err = errors.Join(raftnode.ErrUnknownOutcome, err) // an earlier attempt may have committed
			}
			return nil, 0, fmt.Errorf("propose %T: %w", cmd, err)
		}
		s.log.Debug("retrying a proposal whose outcome is unknown", "cmd", fmt.Sprintf("%T", cmd), "attempt", attempt+1)
		if err := sleep(ctx, time.Duration(50<<attempt)*time.Millisecond); err != nil {
			return nil, 0, fmt.Errorf("propose %T: %w", cmd, errors.Join(raftnode.ErrUnknownOutcome, err))
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Consistency says how current a read must be.
type Consistency int

const (
	// Linearizable reads see every write acknowledged before the read
	// began (read-index through the leader).
	Linearizable Consistency = iota
	// Stale reads this node's table as applied now: they answer without a
	// leader, and may miss recent writes.
	Stale
)

// catchUp makes the local table current enough for a read of consistency
// c.
func (s *Service) catchUp(ctx context.Context, c Consistency) error {
	if c == Stale {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProposeTimeout)
	defer cancel()
	if err := s.node.ReadIndex(ctx); err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	return nil
}

// waitApplied waits briefly until this node has applied index, so that a
// local read reflects the entry an answer is about. Best effort: at worst
// a message is slightly stale.
func (s *Service) waitApplied(ctx context.Context, index uint64) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = s.fsm.WaitApplied(ctx, index)
}

// hasSession reports whether the local table has session id.
func (s *Service) hasSession(id lockstate.SessionID) bool {
	var live bool
	s.fsm.Read(func(t *lockstate.Table) { live = t.HasSession(id) })
	return live
}
