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
// for one batch's apply, and 50,000 sessions take about 400 entries.
// Until every voter applies FormatExpireBatch, each session is one
// ExpireSession entry as before, a bounded number in flight (raft writes
// concurrent ones to disk together).
//
// Batches are paced too: after each, the expirer rests as long as the
// batch took from proposal to commit, so that a storm takes at most about
// half of the log's and the followers' time and a live request finds the
// pipeline free every other moment. Measured with lockbench --mass-expiry
// (50,000 sessions expiring within a second, three nodes and the load on
// two cores; docs/performance.md): unpaced batches of 256 took the live
// acquires' p99 to 4.0 times a quiet one's, all expired within 0.6 s of
// their TTL; paced batches of 128, 2.5 times, within about 3 s; paced
// batches of 64, 2.3-2.5 times, but 8-9 s late (medians of 2-5 runs).
const (
	// expiryBatch is the most sessions one entry ends.
	expiryBatch = 128
	// expirySinglesInFlight bounds the single-session expiries in flight
	// while a voter runs a build before FormatExpireBatch.
	expirySinglesInFlight = 64
	// expiryLoggedIDs is how many of an entry's sessions its log line
	// names; the rest it counts.
	expiryLoggedIDs = 8
	// maxExpiryRest caps the rest after a batch (as long as the batch
	// took), so a commit slowed by a stalled disk does not hold the next
	// batch back by as long again.
	maxExpiryRest = 100 * time.Millisecond
)

// expiryOutcome is one expiry proposal's end.
type expiryOutcome struct {
	ids   []lockstate.SessionID
	res   *lockstate.Result
	index uint64
	err   error
	took  time.Duration // from proposal to outcome
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
	// pause ends a rest after a batch or a backoff after a failed
	// proposal (paused until then); stopped otherwise.
	pause   *time.Timer
	paused  bool
	backoff time.Duration
}

func newExpirer(n *Node, l *leadership) *expirer {
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	return &expirer{n: n, l: l, pause: pause,
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
	for !e.paused && len(e.queue) > 0 && e.inFlight < limit {
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
	start := time.Now()
	res, index, err := e.n.proposeLocal(e.l.ctx, cmd)
	took := time.Since(start)
	if err == nil {
		e.logExpired(ids, public, res, index)
	}
	e.done <- expiryOutcome{ids: ids, res: res, index: index, err: err, took: took}
}

// finished takes a proposal's outcome. A committed one (a session gone
// already is fine: closed meanwhile, or an earlier attempt with an
// unknown outcome did commit) forgets its sessions, and after a batch
// the expirer rests; a failed one goes back to the front of the queue
// after a backoff, each time longer; one cut by the end of leadership is
// left to the next leader, which re-arms every session.
func (e *expirer) finished(o expiryOutcome) {
	e.inFlight--
	if o.err == nil {
		for _, id := range o.ids {
			e.l.timers.drop(id)
		}
		e.backoff = 0
		if rest := min(o.took, maxExpiryRest); len(o.ids) > 1 && rest > 0 {
			e.pauseFor(rest)
		}
		return
	}
	if e.l.ctx.Err() != nil {
		return
	}
	e.n.logger.Warn("session expiry failed; retrying", "sessions", len(o.ids), "error", o.err)
	e.queue = append(o.ids[:len(o.ids):len(o.ids)], e.queue...)
	e.backoff = min(max(2*e.backoff, e.n.timing.retryMin), maxDutyBackoff)
	e.pauseFor(e.backoff)
}

// pauseFor holds proposals back for d.
func (e *expirer) pauseFor(d time.Duration) {
	e.paused = true
	e.pause.Reset(d)
}

// resumed ends a rest or a backoff (its timer fired).
func (e *expirer) resumed() { e.paused = false }

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
