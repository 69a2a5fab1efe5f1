package api

import (
	"net/http"
	"time"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// The table's views (lockstate) as the JSON shapes of the HTTP API
// (package wire).

// modeOf is a wire mode in the table's terms; absent (empty) is write.
func modeOf(m wire.Mode) lockstate.Mode {
	if m == wire.Read {
		return lockstate.Read
	}
	return lockstate.Write
}

// clockTime converts a table-clock instant (Unix nanoseconds on the
// leader's clock) to a time; 0 stays the zero time.
func clockTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// sinceOf says when the entry at an index was proposed (zero: unknown);
// the views take it to date holds, waiters and sessions.
type sinceOf func(index uint64) time.Time

// setTableTime puts the node's table time in X-Table-Time: the clock of
// an answer's "since" fields. An age is X-Table-Time less since, not the
// reader's clock less it: table time stands still while the cluster is
// down as a whole.
func (s *Server) setTableTime(w http.ResponseWriter) {
	if t := s.locks.TableNow(); !t.IsZero() {
		w.Header().Set("X-Table-Time", t.Format(time.RFC3339Nano))
	}
}

func sessionJSON(si lockstate.SessionInfo, since sinceOf) wire.Session {
	s := wire.Session{ID: si.Key, Since: since(uint64(si.ID)), Revoked: revocationsJSON(si.Revoked), Name: si.Name, TTL: wire.Duration(si.TTL), OnDeadlock: string(si.OnDeadlock),
		Ordered: si.Ordered, LockDelay: wire.Duration(si.LockDelay), Held: make([]wire.HeldLock, len(si.Held)), Pending: si.Pending}
	for i, h := range si.Held {
		s.Held[i] = wire.HeldLock{Name: h.Name, Mode: wire.Mode(h.Mode.String()), Weight: h.Weight, Count: h.Count, Token: h.Token,
			Expires: clockTime(h.Expires), Since: since(h.Token), Value: h.Value}
	}
	if s.Pending == nil {
		s.Pending = []string{}
	}
	return s
}

func revocationsJSON(rs []lockstate.Revocation) []wire.Revocation {
	out := make([]wire.Revocation, len(rs))
	for i, r := range rs {
		out[i] = wire.Revocation{Name: r.Name, Token: r.Token, Index: r.Index}
	}
	return out
}

func lockJSON(li lockstate.LockInfo, since sinceOf) wire.Lock {
	l := wire.Lock{Name: li.Name, Version: li.Version, Limit: li.Limit, DelayedUntil: clockTime(li.DelayedUntil),
		Holders: make([]wire.Holder, len(li.Holders)), Waiters: make([]wire.Waiter, len(li.Waiters))}
	for i, h := range li.Holders {
		l.Holders[i] = wire.Holder{Session: h.Key, Mode: wire.Mode(h.Mode.String()), Weight: h.Weight, Count: h.Count,
			Token: h.Token, Expires: clockTime(h.Expires), Since: since(h.Token), Value: h.Value}
	}
	for i, w := range li.Waiters {
		l.Waiters[i] = wire.Waiter{Session: w.Key, RequestID: w.RequestID, Mode: wire.Mode(w.Mode.String()), Weight: w.Weight,
			Since: since(w.Created), Value: w.Value}
	}
	return l
}

// electionJSON is a name read as an election; its leader's since is when
// its hold was granted, as a holder's.
func electionJSON(e lockservice.ElectionView, since sinceOf) wire.Election {
	out := wire.Election{Name: e.Name, Version: e.Version, Candidates: e.Candidates}
	if h := e.Leader; h != nil {
		out.Leader = &wire.ElectionLeader{Value: h.Value, Token: h.Token, Since: since(h.Token)}
	}
	return out
}

func grantsJSON(gs []lockstate.Grant) []wire.Grant {
	out := make([]wire.Grant, len(gs))
	for i, g := range gs {
		out[i] = wire.Grant{Name: g.Name, Mode: wire.Mode(g.Mode.String()), Weight: g.Weight, Token: g.Token}
	}
	return out
}

func requestJSON(ri *lockstate.RequestInfo) wire.Request {
	r := wire.Request{RequestID: ri.ID, Session: lockstate.PublicID(ri.Session, ri.Key), Status: string(ri.Status), Token: ri.Token,
		Granted: grantsJSON(ri.Granted), Locks: make([]wire.LockSpec, len(ri.Locks)),
		Created: ri.Created, Ended: ri.Ended, Deadline: clockTime(ri.Deadline)}
	for i, sp := range ri.Locks {
		r.Locks[i] = wire.LockSpec{Name: sp.Name, Mode: wire.Mode(sp.Mode.String()), Weight: sp.Weight, Limit: sp.Limit, Value: sp.Value}
	}
	return r
}

func grantedJSON(ri *lockstate.RequestInfo) wire.AcquireResponse {
	return wire.AcquireResponse{Status: string(lockstate.Granted), RequestID: ri.ID, Session: lockstate.PublicID(ri.Session, ri.Key),
		Token: ri.Token, Granted: grantsJSON(ri.Granted)}
}
