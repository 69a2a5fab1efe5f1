package lockservice

import (
	"context"

	"github.com/lockd/lockd/lockstate"
)

// Leader election (docs/api.md, "Leader election"): a hold carries a
// value, the holder replaces it with Proclaim, and Election reads a name
// as an election.

// Proclaim replaces the value of a hold the session (whose key is
// session) has on cmd.Name, keeping the hold and its fencing token, and
// returns what the hold is now, with the name's version. cmd.Session is
// set from session.
//
// A proclaim whose outcome is unknown is sent again: it sets a value, it
// counts nothing, so a repeat of one that was applied finds the value set
// and changes nothing more (the table leaves a hold alone whose value is
// already the one proclaimed), and a repeat never reaches a hold the
// first could not: only one the session has when it is applied, with the
// token cmd.Token names when it names one. Without a token, the only
// thing a late repeat can meet that the first did not is what the same
// client did meanwhile through the same session (another proclaim, or
// the name won again), calls that ran at the same time as this one and
// so have no order with it.
func (s *Service) Proclaim(ctx context.Context, session string, cmd *lockstate.Proclaim) (*lockstate.Proclamation, error) {
	id, err := s.resolveSession(ctx, session)
	if err != nil {
		return nil, err
	}
	cmd.Session = id
	res, _, err := s.propose(ctx, cmd, idempotent)
	if err != nil {
		return nil, err
	}
	return res.Proclaimed, nil
}

// ElectionView is one name read as an election.
type ElectionView struct {
	Name    string
	Version uint64 // the name's version, as LockView's
	// Leader is the name's leader (lockstate.LockInfo.Leader: of its
	// holders, the one with the smallest fencing token), its session
	// redacted as in a lock view; nil when nobody holds the name.
	Leader *lockstate.Holder
	// Candidates is how many requests queue on the name.
	Candidates int
}

// Election reads one name as an election: Lock's read, with its access
// rule, consistency and blocking (q.Block waits for the name's version
// to pass q.Index), and the leader and candidates of what it saw. A name
// nobody holds or waits for is no refusal: it has no leader, and an
// observer may block on it until it has one.
func (s *Service) Election(ctx context.Context, c Consistency, q LockQuery) (ElectionView, error) {
	v, err := s.Lock(ctx, c, q)
	if err != nil {
		return ElectionView{}, err
	}
	e := ElectionView{Name: q.Name, Version: v.Version, Candidates: len(v.Lock.Waiters)}
	if h, ok := v.Lock.Leader(); ok {
		e.Leader = &h
	}
	return e, nil
}
