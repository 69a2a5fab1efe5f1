package raftnode

import (
	"strings"
	"time"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// A mass expiry (a rack of clients gone at once) must neither stall the
// live sessions' requests nor outlive its TTLs by much (etcd revokes 1,000
// leases a second and once ran 600 s late: etcd#12105). The leader ends
// expired sessions in batches, one ExpireSessions entry per batch in
// deadline order, one batch in flight: an acquire queued behind it waits
// for one batch's apply, about a millisecond, and 50,000 sessions take
// about 200 entries. Until every voter applies FormatExpireBatch, each
// session is one ExpireSession entry as before, a bounded number in
// flight (raft writes concurrent ones to disk together).
const (
	// expiryBatch is the most sessions one entry ends.
	expiryBatch = 256
	// expirySinglesInFlight bounds the single-session expiries in flight
	// while a voter runs a build before FormatExpireBatch.
	expirySinglesInFlight = 64
	// expiryLoggedIDs is how many of an entry's sessions its log line
	// names; the rest it counts.
	expiryLoggedIDs = 8
)

// expiryOutcome is one expiry proposal's end.
type expiryOutcome struct {
	ids   []lockstate.SessionID
	res   *lockstate.Result
	index uint64
	err   error
}

// expirer is runSessionExpiry's proposer of expiries: the sessions whose
// expiry it has decided, in deadline order, and the proposals in flight.
// Only runSessionExpiry's goroutine touches it, but for done.
type expirer struct {
	n *Node
	l *leadership
	// queue holds the decided sessions not yet proposed, earliest
	// deadline first. Their timers are marked expiring: keepalives for
	// them are refused.
	queue    []lockstate.SessionID
	inFlight int
	// done takes the outcomes; its buffer holds every proposal that can
	// be in flight, so that a proposal never blocks on it, also once
	// runSessionExpiry has returned.
	done chan expiryOutcome
	// retry ends a backoff after a failed proposal; stopped otherwise.
	retry      *time.Timer
	backingOff bool
	backoff    time.Duration
}

func newExpirer(n *Node, l *leadership) *expirer {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	return &expirer{n: n, l: l, retry: retry,
		done: make(chan expiryOutcome, expirySinglesInFlight)}
}

// add queues sessions whose deadline passed, in deadline order.
func (e *expirer) add(ids []lockstate.SessionID) { e.queue = append(e.queue, ids...) }

// start proposes from the front of the queue while a proposal may be in
// flight: one batch, or up to expirySinglesInFlight single expiries while
// a voter cannot apply a batch. The format is read at each start, so an
// upgrade finished mid-storm batches the rest.
func (e *expirer) start() {
	batched := e.n.logFormat() >= fsm.FormatExpireBatch
	limit, size := expirySinglesInFlight, 1
	if batched {
		limit, size = 1, expiryBatch
	}
	for !e.backingOff && len(e.queue) > 0 && e.inFlight < limit {
		k := min(size, len(e.queue))
		ids := e.queue[:k:k]
		e.queue = e.queue[k:]
		e.inFlight++
		e.l.wg.Add(1)
		go e.propose(ids, batched)
	}
}

// propose commits the expiry of ids and reports the outcome on done.
func (e *expirer) propose(ids []lockstate.SessionID, batched bool) {
	defer e.l.wg.Done()
	var cmd lockstate.Command = &lockstate.ExpireSession{Session: ids[0]}
	if batched {
		cmd = &lockstate.ExpireSessions{Sessions: ids}
	}
	public := e.n.publicSessionIDs(ids[:min(len(ids), expiryLoggedIDs)])
	res, index, err := e.n.proposeLocal(e.l.ctx, cmd)
	if err == nil {
		e.logExpired(ids, public, res, index)
	}
	e.done <- expiryOutcome{ids: ids, res: res, index: index, err: err}
}

// finished takes a proposal's outcome. A committed one (a session gone
// already is fine: closed meanwhile, or an earlier attempt with an
// unknown outcome did commit) forgets its sessions; a failed one goes
// back to the front of the queue after a backoff, each time longer; one
// cut by the end of leadership is left to the next leader, which re-arms
// every session.
func (e *expirer) finished(o expiryOutcome) {
	e.inFlight--
	if o.err == nil {
		for _, id := range o.ids {
			e.l.timers.drop(id)
		}
		e.backoff = 0
		return
	}
	if e.l.ctx.Err() != nil {
		return
	}
	e.n.logger.Warn("session expiry failed; retrying", "sessions", len(o.ids), "error", o.err)
	e.queue = append(o.ids[:len(o.ids):len(o.ids)], e.queue...)
	e.backoff = min(max(2*e.backoff, e.n.timing.retryMin), maxDutyBackoff)
	e.backingOff = true
	e.retry.Reset(e.backoff)
}

// retried ends a backoff (its timer fired).
func (e *expirer) retried() { e.backingOff = false }

// logExpired logs a committed expiry entry: the sessions it ended, named
// up to expiryLoggedIDs; a refusal other than "no such session" is an
// error (the leader proposed what the table would not take).
func (e *expirer) logExpired(ids []lockstate.SessionID, public []string, res *lockstate.Result, index uint64) {
	if res.Err != nil && res.Err.Code != lockstate.CodeNoSession {
		e.n.logger.Error("session expiry refused", "sessions", strings.Join(public, ","), "error", res.Err)
		return
	}
	ended := 0
	for _, ev := range res.Events {
		if ev.Kind == lockstate.EvSessionExpired {
			ended++
		}
	}
	if ended == 0 {
		return
	}
	args := []any{"count", ended, "index", index, "sessions", strings.Join(public, ",")}
	if more := len(ids) - len(public); more > 0 {
		args = append(args, "more", more)
	}
	e.n.logger.Info("sessions expired", args...)
}

// publicSessionIDs are the ids the API shows for ids (what users see,
// and what the log names): each session's key, or its number for a
// session of a build before keys or one that is gone.
func (n *Node) publicSessionIDs(ids []lockstate.SessionID) []string {
	out := make([]string, len(ids))
	n.fsm.Read(func(t *lockstate.Table) {
		for i, id := range ids {
			key := ""
			if info, ok := t.Session(id); ok {
				key = info.Key
			}
			out[i] = lockstate.PublicID(id, key)
		}
	})
	return out
}
