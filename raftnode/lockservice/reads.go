package lockservice

import (
	"context"
	"sync"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// Page selects part of a list: the items after After, at most Limit of
// them (0: all).
type Page struct {
	After string
	Limit int
}

// Locks returns the names with holders, waiters or a lock-delay under
// prefix ("" for all) that the caller may read, in name order, one page
// of them, and the After of the next page ("" after the last).
func (s *Service) Locks(ctx context.Context, c Consistency, prefix string, p Page) ([]lockstate.LockInfo, string, error) {
	if err := s.catchUp(ctx, c); err != nil {
		return nil, "", err
	}
	var out []lockstate.LockInfo
	var next string
	err := s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		out, next = t.LocksPage(prefix, p.After, p.Limit, func(name string) bool { return mayRead(tok, name) == nil })
		for i := range out {
			redact(&out[i], tok)
		}
		return nil
	})
	return out, next, err
}

// LockQuery asks for one name. With Block set it is a blocking query: it
// answers once the name's version is above Index, or when Wait (0 and
// above MaxWait: MaxWait) runs out, with the state then.
type LockQuery struct {
	Name  string
	Block bool
	Index uint64
	Wait  time.Duration
}

// LockView is one name as a read saw it. Version is the name's version
// even when nobody holds, waits for or delays it (Found false).
type LockView struct {
	Lock    lockstate.LockInfo
	Found   bool
	Version uint64
}

// Lock reads one name (see LockQuery).
func (s *Service) Lock(ctx context.Context, c Consistency, q LockQuery) (LockView, error) {
	if err := lockstate.ValidName(q.Name); err != nil {
		return LockView{}, err
	}
	if err := s.catchUp(ctx, c); err != nil {
		return LockView{}, err
	}
	if err := s.readable(ctx, q.Name); err != nil {
		return LockView{}, err
	}
	if q.Block {
		wait := q.Wait
		if wait == 0 {
			wait = s.cfg.MaxWait
		}
		s.awaitChange(ctx, time.Now().Add(min(wait, s.cfg.MaxWait)), func(t *lockstate.Table) bool {
			return t.Version(q.Name) > q.Index
		})
	}
	var v LockView
	err := s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		v.Lock, v.Found = t.Lock(q.Name)
		v.Version = t.Version(q.Name)
		redact(&v.Lock, tok)
		return nil
	})
	return v, err
}

// Check reports whether token is still the current token of a holder of
// name, and the current one.
func (s *Service) Check(ctx context.Context, c Consistency, name string, token uint64) (valid bool, current uint64, err error) {
	if err := lockstate.ValidName(name); err != nil {
		return false, 0, err
	}
	if err := s.catchUp(ctx, c); err != nil {
		return false, 0, err
	}
	if err := s.readable(ctx, name); err != nil {
		return false, 0, err
	}
	s.fsm.Read(func(t *lockstate.Table) { valid, current = t.Check(name, token) })
	return valid, current, nil
}

// readable checks, after the read's catchUp, that the caller may read the
// names.
func (s *Service) readable(ctx context.Context, names ...string) error {
	return s.readAs(ctx, func(_ *lockstate.Table, tok *lockstate.TokenInfo) error { return mayRead(tok, names...) })
}

// Sessions returns the open sessions the caller owns (a management token:
// all of them), one page of them in key order, and the After of the next
// page ("" after the last).
func (s *Service) Sessions(ctx context.Context, c Consistency, p Page) ([]lockstate.SessionInfo, string, error) {
	if err := s.catchUp(ctx, c); err != nil {
		return nil, "", err
	}
	var out []lockstate.SessionInfo
	var next string
	err := s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		out, next = t.SessionsPage(p.After, p.Limit, func(owner string) bool { return owns(tok, owner) })
		return nil
	})
	return out, next, err
}

// Session returns the session whose key is session if the caller owns
// it, or a session_not_found refusal.
func (s *Service) Session(ctx context.Context, c Consistency, session string) (lockstate.SessionInfo, error) {
	id, err := s.resolveSession(ctx, session)
	if err != nil {
		return lockstate.SessionInfo{}, err
	}
	if err := s.catchUp(ctx, c); err != nil {
		return lockstate.SessionInfo{}, err
	}
	var info lockstate.SessionInfo
	var ok bool
	err = s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		if info, ok = t.Session(id); ok && !owns(tok, info.Owner) {
			return sessionNotFound(id) // as if it did not exist: no oracle of other tokens' ids
		}
		return nil
	})
	switch {
	case err != nil:
		return lockstate.SessionInfo{}, err
	case !ok:
		return info, sessionNotFound(id)
	}
	return info, nil
}

// WaitGraph returns the wait-for graph's edges, sorted; management
// tokens only, as it names every waiting session.
func (s *Service) WaitGraph(ctx context.Context, c Consistency) ([]lockstate.Edge, error) {
	if err := s.catchUp(ctx, c); err != nil {
		return nil, err
	}
	var out []lockstate.Edge
	err := s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		if err := mayAdmin(tok); err != nil {
			return err
		}
		out = t.WaitGraph()
		return nil
	})
	return out, err
}

// Authorized checks, as of this node's table, that the caller has a valid
// token (any rights): for what a token of any kind may see, like the
// event stream and metrics.
func (s *Service) Authorized(ctx context.Context) error {
	return s.readable(ctx)
}

// Applied is this node's table at one applied index.
type Applied struct {
	Index  uint64
	Digest [32]byte // comparable across nodes at the same index
}

// Applied returns this node's own applied index with the table's digest
// at exactly that index (a local read: never forwarded).
func (s *Service) Applied() Applied {
	var a Applied
	a.Index, a.Digest = s.fsm.AppliedDigest()
	return a
}

// Stats counts this node's table as applied now (a local read).
func (s *Service) Stats() lockstate.Stats {
	var st lockstate.Stats
	s.fsm.Read(func(t *lockstate.Table) { st = t.Stats() })
	return st
}

// Counters returns what this node's table has applied since it started
// (or last restored a snapshot), for metrics.
func (s *Service) Counters() lockstate.Counters {
	var c lockstate.Counters
	s.fsm.Read(func(t *lockstate.Table) { c = t.Counters() })
	return c
}

// AppliedIndex returns the index of the last entry this node applied.
func (s *Service) AppliedIndex() uint64 { return s.fsm.AppliedIndex() }

// Changed returns a channel closed when the next entry is applied (or a
// snapshot restored): take it, read, then wait on it.
func (s *Service) Changed() <-chan struct{} { return s.fsm.Changed() }

// Closing returns a channel closed when the service closes, so that
// streams end with it.
func (s *Service) Closing() <-chan struct{} { return s.closing }

// entryTimer is the optional side of Node that reads when an entry was
// proposed, in table time, and the table time now (*raftnode.Node has it).
type entryTimer interface {
	EntryTime(index uint64) (int64, bool)
	TableTime() int64
}

// Since returns when the entry at index was proposed, in table time (the
// leader's stamp; raftnode's clock.go): for a hold's fencing token, when
// it was granted; for a session's creation index, when it was created;
// for a waiter's request, when it was queued. Zero once this node's log
// no longer holds the entry (a snapshot compacted it) or when the node
// cannot tell. Answers are kept (entries never change), so a dashboard
// that polls reads each entry once.
func (s *Service) Since(index uint64) time.Time {
	et, ok := s.node.(entryTimer)
	if !ok || index == 0 {
		return time.Time{}
	}
	ns, ok := s.since.get(index)
	if !ok {
		ns, ok = et.EntryTime(index)
		if !ok {
			return time.Time{} // not kept: a node catching up may hold it later
		}
		s.since.put(index, ns)
	}
	return time.Unix(0, ns).UTC()
}

// TableNow is this node's count of table time now, the clock Since's
// answers are on; zero when the node cannot tell.
func (s *Service) TableNow() time.Time {
	et, ok := s.node.(entryTimer)
	if !ok {
		return time.Time{}
	}
	if ns := et.TableTime(); ns != 0 {
		return time.Unix(0, ns).UTC()
	}
	return time.Time{}
}

// sinceCache keeps the entry times Since read, up to sinceKept of them;
// when full it starts again (the entries in use are read back once).
type sinceCache struct {
	mu sync.Mutex
	m  map[uint64]int64
}

const sinceKept = 1 << 16

func (c *sinceCache) get(index uint64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns, ok := c.m[index]
	return ns, ok
}

func (c *sinceCache) put(index uint64, ns int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= sinceKept {
		c.m = make(map[uint64]int64)
	}
	c.m[index] = ns
}
