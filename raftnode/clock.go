package raftnode

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// Table time. Every command carries the time its leader stamped on it,
// and the table measures hold TTLs, lock-delays and wait deadlines by
// those stamps (lockstate.Entry.Now). A stamp read off the leader's wall
// clock would let one clock step — an NTP correction, a VM restored from
// a snapshot, an operator's date command — or one new leader whose clock
// runs ahead expire every hold early on every node, and a step back keep
// them past their time.
//
// So a leader counts table time by its monotonic clock, which no step
// moves: on taking office — once its barrier has applied everything
// committed before its term, so that it has seen the newest table time —
// it starts from the largest table time it has applied plus the time
// since it applied it, and adds the time since. It stamps nothing before
// (a proposal waits, as reads do). The entry that carried that table
// time was stamped before this node applied it, so the start is never
// ahead of the previous leader's count: table time never runs ahead of real time
// between two instants it measures, whatever the wall clocks say. It
// may run behind — by a commit's latency at a leader change, by the
// downtime of a cluster restarted as a whole — which makes deadlines
// later, never earlier. The wall clock is read once per cluster: by the
// first leader of an empty table, so that times shown to users start
// out as calendar times.
//
// Promise: a wall-clock step or skew on any node never shortens or
// lengthens a hold TTL, a lock-delay, a wait or a session TTL (sessions
// are kept by the leader's monotonic timers, sessions.go); only the
// rate of the monotonic clocks counts, assumed right within a small
// bound, as Chubby assumes.

// tableClock is a node's count of table time (see above).
type tableClock struct {
	now  func() time.Time // the node's clock; durations by its monotonic reading
	wall func() int64     // the wall clock, Unix ns, as this node reads it
	// flaw, if set, is read instead of the count (Config.flaws.clock).
	flaw func(*tableClock) int64

	mu     sync.Mutex
	seen   int64     // the largest table time this node applied
	seenAt time.Time // when it applied it
	term   uint64    // the term base counts for; 0: none yet
	base   int64     // table time at since
	since  time.Time
}

func newTableClock(cfg Config, now func() time.Time) *tableClock {
	wall := func() int64 { return now().UnixNano() }
	if cfg.ClockOffset != nil {
		wall = func() int64 { return now().UnixNano() + int64(cfg.ClockOffset()) }
	}
	return &tableClock{now: now, wall: wall, flaw: cfg.flaws.clock}
}

// applied notes the table time after an entry or a snapshot was applied.
func (c *tableClock) applied(tableTime int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tableTime > c.seen {
		c.seen, c.seenAt = tableTime, c.now()
	}
}

// start begins the count for term, once this node leads it and its
// barrier has applied every entry committed before (leaderLoop): only
// then is the table time it applied the newest there is. An empty table
// takes the wall clock.
func (c *tableClock) start(term uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.term, c.since = term, now
	c.base = c.wall()
	if c.seen != 0 {
		c.base = c.seen + int64(now.Sub(c.seenAt))
	}
}

// read returns the table time for this node as leader of term: a stamp
// for a command it proposes, or the time to compare table deadlines with.
// ok is false when the count for term has not started (start): the node
// does not lead it yet, and must not stamp.
func (c *tableClock) read(term uint64) (t int64, ok bool) {
	if c.flaw != nil {
		return c.flaw(c), true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if term != c.term {
		return 0, false
	}
	return c.base + int64(c.now().Sub(c.since)), true
}

// estimate is this node's count of table time now, on any node: the
// largest table time it applied plus the time since it applied it (what
// a leader starts from); 0 before it applied any.
func (c *tableClock) estimate() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == 0 {
		return 0
	}
	return c.seen + int64(c.now().Sub(c.seenAt))
}

// clockedFSM is the raft.FSM raft drives: the node's FSM, telling the
// node's tableClock what table time each applied entry or restored
// snapshot left.
type clockedFSM struct {
	*fsm.FSM
	clock *tableClock
}

// Apply applies l and notes the table time.
func (f clockedFSM) Apply(l *raft.Log) any {
	res := f.FSM.Apply(l)
	f.note()
	return res
}

// Restore restores a snapshot and notes the table time.
func (f clockedFSM) Restore(rc io.ReadCloser) error {
	err := f.FSM.Restore(rc)
	f.note()
	return err
}

func (f clockedFSM) note() {
	var t int64
	f.FSM.Read(func(tab *lockstate.Table) { t = tab.Clock() })
	f.clock.applied(t)
}
