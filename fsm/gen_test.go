package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/quorum"
)

// source makes the generator's choices: math/rand/v2 for the long random
// logs, the fuzzer's bytes for FuzzApplySequence.
type source interface {
	IntN(n int) int
}

// byteSource draws choices from fuzz input; once it runs dry every choice
// is 0 and done reports true.
type byteSource struct{ b []byte }

func (s *byteSource) IntN(n int) int {
	if len(s.b) == 0 {
		return 0
	}
	v := int(s.b[0])
	s.b = s.b[1:]
	return v % n
}

func (s *byteSource) done() bool { return len(s.b) == 0 }

// Names in a small hierarchy, so that requests meet on ancestors and
// descendants, plus two semaphores.
var (
	genNames = []string{"a", "a/b", "a/b/c", "a/c", "b", "b/x", "b/x/y", "c", "d/e"}
	genSems  = []string{"sem", "pool/gpu"}
)

// gen produces a plausible, often conflicting, lock workload: mostly valid
// commands on live sessions and held names, with waits, hold TTLs,
// lock-delays, expiries, multi-lock requirements and some bad input. It
// looks at the table through an FSM to pick held names and pending
// requests, so it is deterministic for a given source and log.
type gen struct {
	src      source
	now      int64
	sessions []lockstate.SessionID // created and not known to be ended
	reqs     []string              // request ids seen, for releases, cancels and retries
	nextReq  int
	acl      *aclGen // nil: a log without ACLs, as before FormatACL
	// scoped is the percentage of acquires whose request id is their
	// session's own (FormatSessionRequestIDs); 0 for a log before it.
	scoped int
	// values is the percentage of locks that give their hold a value, and
	// of entries that are proclaims (FormatHoldValues); 0 for a log
	// before it, which then draws exactly what it drew before values.
	values int
	// batches is the percentage of entries that expire several sessions
	// at once (ExpireSessions, FormatExpireBatch); 0 for a log before it.
	batches int
	// What the scoped acquires led to: a new request with an id another
	// session's request has, and cancels refused for naming several.
	shared, ambiguous int
	idSession         map[string]lockstate.SessionID // the last session seen with each id
	sharedIDs         []string                       // ids seen in two sessions, for cancels of any session
}

func newGen(src source) *gen {
	return &gen{src: src, now: int64(1000 * time.Hour)}
}

func (g *gen) pct(p int) bool { return g.src.IntN(100) < p }

func (g *gen) dur(max time.Duration, step time.Duration) time.Duration {
	return time.Duration(g.src.IntN(int(max/step))+1) * step
}

func (g *gen) session() lockstate.SessionID {
	if len(g.sessions) == 0 || g.pct(3) {
		return lockstate.SessionID(g.src.IntN(50) + 1) // probably unknown
	}
	return g.sessions[g.src.IntN(len(g.sessions))]
}

// genValues are the values holds are given: few, so that proclaims often
// repeat the value a hold has.
var genValues = []string{"10.0.0.1:8080", "10.0.0.2:8080", "ünï ✓", strings.Repeat("v", lockstate.MaxValueLen)}

// next returns the next command and moves the clock.
func (g *gen) next(f *FSM) lockstate.Command {
	var cmd lockstate.Command
	switch {
	case g.batches > 0 && g.pct(g.batches):
		cmd = g.expireBatch()
	case g.values > 0 && g.pct(g.values/4):
		cmd = g.proclaim(f)
	default:
		cmd = g.nextPlain(f)
	}
	if g.acl != nil {
		cmd = g.aclize(cmd)
	}
	return cmd
}

// nextPlain is next without ACLs.
func (g *gen) nextPlain(f *FSM) lockstate.Command {
	switch g.src.IntN(10) {
	case 0, 1, 2, 3:
		g.now += int64(g.src.IntN(300)) * int64(time.Millisecond)
	case 4:
		g.now += int64(g.dur(20*time.Second, 500*time.Millisecond))
	}
	if len(g.sessions) < 2 {
		return g.create()
	}
	switch op := g.src.IntN(100); {
	case op < 8:
		return g.create()
	case op < 45:
		return g.acquire()
	case op < 65:
		return g.release(f)
	case op < 72:
		return g.surrender(f)
	case op < 79:
		return g.cancel(f)
	case op < 87:
		g.now += int64(g.dur(10*time.Second, 250*time.Millisecond))
		return &lockstate.Tick{}
	case op < 91:
		return &lockstate.CloseSession{Session: g.session()}
	case op < 96:
		return &lockstate.ExpireSession{Session: g.session()}
	default:
		return g.bad()
	}
}

func (g *gen) create() lockstate.Command {
	c := &lockstate.CreateSession{Name: fmt.Sprintf("client-%d", g.src.IntN(10)), TTL: 10 * time.Second}
	if g.pct(35) {
		c.OnDeadlock = lockstate.SurrenderLock
	}
	c.Ordered = g.pct(10)
	if g.pct(30) {
		c.LockDelay = g.dur(3*time.Second, 250*time.Millisecond)
	}
	return c
}

func (g *gen) acquire() lockstate.Command {
	c := &lockstate.Acquire{Session: g.session()}
	k := 1
	if p := g.src.IntN(100); p >= 85 {
		k = 3
	} else if p >= 60 {
		k = 2
	}
	for len(c.Locks) < k {
		var sp lockstate.LockSpec
		if g.pct(15) {
			sp = lockstate.LockSpec{Name: genSems[g.src.IntN(len(genSems))], Mode: lockstate.Write,
				Weight: g.src.IntN(3) + 1, Limit: 3}
			if g.pct(20) {
				sp.Limit = 0 // as it is
			}
			if g.pct(10) {
				sp.Mode, sp.Weight = lockstate.Read, 0
			}
		} else {
			sp = lockstate.LockSpec{Name: genNames[g.src.IntN(len(genNames))], Mode: lockstate.Write}
			if g.pct(40) {
				sp.Mode = lockstate.Read
			}
		}
		if !slices.ContainsFunc(c.Locks, func(o lockstate.LockSpec) bool { return o.Name == sp.Name }) {
			c.Locks = append(c.Locks, sp)
		} else if g.pct(50) {
			break // fewer locks than planned rather than a long retry loop on a dry source
		}
	}
	if k > 1 {
		switch g.src.IntN(5) {
		case 0:
			c.Require = quorum.Any
		case 1:
			c.Require = quorum.Majority
		case 2:
			c.Require = quorum.All
		}
	}
	if !g.pct(30) {
		c.Wait = g.dur(30*time.Second, 500*time.Millisecond)
	}
	if g.pct(30) {
		c.HoldTTL = g.dur(20*time.Second, 500*time.Millisecond)
	}
	switch p := g.src.IntN(100); {
	case p < 40:
		g.nextReq++
		c.RequestID = fmt.Sprintf("r%d", g.nextReq)
	case p < 48+g.scoped/2 && len(g.reqs) > 0:
		c.RequestID = g.reqs[g.src.IntN(len(g.reqs))] // a retry, maybe from another session
		if strings.HasPrefix(c.RequestID, "~") {
			c.RequestID = ""
		}
	}
	if g.scoped > 0 {
		c.SessionScoped = g.pct(g.scoped)
	}
	for i := range c.Locks {
		if g.values > 0 && g.pct(g.values) {
			c.Locks[i].Value = genValues[g.src.IntN(len(genValues))]
		}
	}
	return c
}

// expireBatch expires one to eight sessions in one entry, as a leader's
// mass expiry does: mostly live ones, now and then one that is gone or
// unknown, which the entry skips.
func (g *gen) expireBatch() lockstate.Command {
	c := &lockstate.ExpireSessions{}
	for range 1 + g.src.IntN(8) {
		if id := g.session(); !slices.Contains(c.Sessions, id) {
			c.Sessions = append(c.Sessions, id)
		}
	}
	return c
}

// proclaim is usually a holder's on a name it holds, now and then with a
// bad value or a token.
func (g *gen) proclaim(f *FSM) lockstate.Command {
	s := g.session()
	c := &lockstate.Proclaim{Session: s, Name: g.heldName(f, s), Value: genValues[g.src.IntN(len(genValues))]}
	switch p := g.src.IntN(100); {
	case p < 10:
		c.Value = ""
	case p < 13:
		c.Value = strings.Repeat("v", lockstate.MaxValueLen+1)
	case p < 30:
		c.Token = uint64(g.src.IntN(2000)) // the hold's, now and then
	}
	return c
}

// held returns the names s holds, or nil.
func held(f *FSM, s lockstate.SessionID) []string {
	var names []string
	f.Read(func(t *lockstate.Table) {
		if si, ok := t.Session(s); ok {
			for _, h := range si.Held {
				names = append(names, h.Name)
			}
		}
	})
	return names
}

func (g *gen) heldName(f *FSM, s lockstate.SessionID) string {
	if names := held(f, s); len(names) > 0 && !g.pct(5) {
		return names[g.src.IntN(len(names))]
	}
	return genNames[g.src.IntN(len(genNames))]
}

func (g *gen) release(f *FSM) lockstate.Command {
	s := g.session()
	if g.pct(20) && len(g.reqs) > 0 {
		return &lockstate.Release{Session: s, RequestID: g.reqs[g.src.IntN(len(g.reqs))]}
	}
	return &lockstate.Release{Session: s, Name: g.heldName(f, s)}
}

func (g *gen) surrender(f *FSM) lockstate.Command {
	s := g.session()
	return &lockstate.Surrender{Session: s, Name: g.heldName(f, s)}
}

func (g *gen) cancel(f *FSM) lockstate.Command {
	s := g.session()
	var pending []string
	f.Read(func(t *lockstate.Table) {
		if si, ok := t.Session(s); ok {
			pending = si.Pending
		}
	})
	c := &lockstate.Cancel{Session: s}
	if g.pct(30) {
		c.Session = 0 // any session
	}
	switch {
	case len(g.sharedIDs) > 0 && g.pct(g.scoped/2):
		c.Session, c.RequestID = 0, g.sharedIDs[g.src.IntN(len(g.sharedIDs))] // maybe several sessions'
	case len(pending) > 0 && !g.pct(10):
		c.RequestID = pending[g.src.IntN(len(pending))]
	case len(g.reqs) > 0:
		c.RequestID = g.reqs[g.src.IntN(len(g.reqs))]
	default:
		c.RequestID = "nope"
	}
	return c
}

// bad returns a well-formed command with bad content.
func (g *gen) bad() lockstate.Command {
	s := g.session()
	switch g.src.IntN(8) {
	case 0:
		return &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock("a//b", lockstate.Write)}}
	case 1:
		return &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock(strings.Repeat("x", 600), lockstate.Write)}}
	case 2:
		return &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "sem", Mode: lockstate.Write, Weight: 9, Limit: 3}}}
	case 3:
		return &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "sem", Mode: lockstate.Write, Limit: 7}}}
	case 4:
		return &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: "a", Mode: 9}}}
	case 5:
		return &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock("a", lockstate.Read)}, Require: "most"}
	case 6:
		return &lockstate.CreateSession{TTL: time.Millisecond}
	default:
		return &lockstate.Release{Session: s}
	}
}

// observe learns session and request ids from a command's result and
// events.
func (g *gen) observe(cmd lockstate.Command, res *lockstate.Result) {
	if g.acl != nil {
		g.aclObserve(cmd, res)
	}
	g.observeIDs(cmd, res)
	if res == nil || res.Err != nil {
		return
	}
	for _, ev := range res.Events {
		switch ev.Kind {
		case lockstate.EvSessionCreated:
			g.sessions = append(g.sessions, ev.Session)
		case lockstate.EvSessionClosed, lockstate.EvSessionExpired:
			g.sessions = slices.DeleteFunc(g.sessions, func(s lockstate.SessionID) bool { return s == ev.Session })
		}
	}
	if res.Request != nil && !slices.Contains(g.reqs, res.Request.ID) {
		g.reqs = append(g.reqs, res.Request.ID)
		if len(g.reqs) > 64 {
			g.reqs = g.reqs[1:]
		}
	}
}

// observeIDs counts what scoped request ids led to.
func (g *gen) observeIDs(cmd lockstate.Command, res *lockstate.Result) {
	if res == nil {
		return
	}
	if _, ok := cmd.(*lockstate.Cancel); ok && res.Err != nil && res.Err.Code == lockstate.CodeInvalid {
		g.ambiguous++
	}
	if r := res.Request; r != nil && res.Err == nil {
		if g.idSession == nil {
			g.idSession = map[string]lockstate.SessionID{}
		}
		if s, ok := g.idSession[r.ID]; ok && s != r.Session {
			g.shared++
			if g.sharedIDs = append(g.sharedIDs, r.ID); len(g.sharedIDs) > 16 {
				g.sharedIDs = g.sharedIDs[1:]
			}
		}
		g.idSession[r.ID] = r.Session
	}
}
