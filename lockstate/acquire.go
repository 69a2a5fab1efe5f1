package lockstate

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockd/lockd/quorum"
)

// LockSpec is one lock named in an acquire request.
type LockSpec struct {
	Name   string `msgpack:"name"`
	Mode   Mode   `msgpack:"mode"`
	Weight int    `msgpack:"weight,omitempty"` // permits taken on a semaphore; 0 means 1
	Limit  int    `msgpack:"limit,omitempty"`  // semaphore size; 0 means "as it is" (1 for a new name)
	// Value is what the hold says about its holder (a leader's address):
	// UTF-8 text of at most MaxValueLen bytes. A new hold takes it; a
	// reentrant grant or an upgrade replaces the hold's value only with a
	// non-empty one. Entries carry it since fsm.FormatHoldValues.
	Value string `msgpack:"value,omitempty"`
}

// Acquire asks for one or more locks for a session.
type Acquire struct {
	Session   SessionID          `msgpack:"session"`
	RequestID string             `msgpack:"request_id,omitempty"` // idempotency key; "" lets the table assign one
	Locks     []LockSpec         `msgpack:"locks"`
	Require   quorum.Requirement `msgpack:"require,omitempty"`
	Wait      time.Duration      `msgpack:"wait,omitempty"`     // 0: try once; >0: queue at most this long
	HoldTTL   time.Duration      `msgpack:"hold_ttl,omitempty"` // >0: the grant is released automatically after this long
	Authority                    // the ACL token acting (acl.go)
	Limits    *Limits            `msgpack:"limits,omitempty"`
	// SessionScoped makes RequestID the session's own: another session's
	// request with the same id neither refuses this acquire nor is taken
	// for it. The leader sets it (fsm.LeaderFields) once every voter
	// applies fsm.FormatSessionRequestIDs. Without it an id that another
	// session's request has is refused, the rule of the builds before
	// that format: an older voter applies the same entry to the same end,
	// and an old log replays as it did.
	SessionScoped bool `msgpack:"session_scoped,omitempty"`
}

// Validate checks the request and each of its locks. A spec's weight 0
// stands for 1; whether a weight fits a limit the table already has is
// decided on apply.
func (c *Acquire) Validate() *Error {
	if err := requireSession(c.Session); err != nil {
		return err
	}
	if err := validRequestID(c.RequestID); err != nil {
		return err
	}
	if n := len(c.Locks); n == 0 || n > MaxLocksPerReq {
		return invalidf("locks must name 1 to %d locks, not %d", MaxLocksPerReq, n)
	}
	if _, err := quorum.Parse(string(c.Require)); err != nil {
		return invalidf("require %q is not all, any or majority", c.Require)
	}
	if err := inRange("wait", c.Wait, 0, MaxWait); err != nil {
		return err
	}
	if err := inRange("hold_ttl", c.HoldTTL, 0, MaxHoldTTL); err != nil {
		return err
	}
	if err := validAuth(c.Auth); err != nil {
		return err
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	for i, sp := range c.Locks {
		if err := sp.validate(); err != nil {
			return err
		}
		for _, prev := range c.Locks[:i] {
			if prev.Name == sp.Name {
				return invalidf("lock %q is named twice", sp.Name)
			}
		}
	}
	return nil
}

// validate checks one lock of an acquire.
func (sp LockSpec) validate() *Error {
	if err := ValidName(sp.Name); err != nil {
		return err
	}
	if sp.Mode != Read && sp.Mode != Write {
		return invalidf("lock %q: mode must be read or write", sp.Name)
	}
	if sp.Limit < 0 || sp.Limit > MaxLimit {
		return invalidf("lock %q: limit %d is outside [0, %d]", sp.Name, sp.Limit, MaxLimit)
	}
	w := sp.weight()
	switch {
	case w < 1 || (sp.Mode == Read && w != 1):
		return invalidf("lock %q: weight %d is invalid (read takes 1; write 1..limit)", sp.Name, w)
	case sp.Limit > 0 && w > sp.Limit:
		return invalidf("lock %q: weight %d is over its limit %d", sp.Name, w, sp.Limit)
	}
	if p := valueProblem(sp.Value); p != "" {
		return invalidf("lock %q: value %s", sp.Name, p)
	}
	return nil
}

// weight is the permits the spec takes: Weight, where 0 means 1.
func (sp LockSpec) weight() int {
	if sp.Weight == 0 {
		return 1
	}
	return sp.Weight
}

// fillDefaults sets each spec's weight (0 means 1) in place, the command
// being the entry's own, and returns the requirement and how many locks
// it needs. c has been validated.
func fillDefaults(c *Acquire) (quorum.Requirement, int) {
	for i := range c.Locks {
		c.Locks[i].Weight = c.Locks[i].weight()
	}
	req, _ := quorum.Parse(string(c.Require))
	need, _ := req.Need(len(c.Locks))
	return req, need
}

// apply queues or grants the request, or finds the earlier one a retry
// names.
func (c *Acquire) apply(t *Table) Result {
	s := t.sessions[c.Session]
	if s == nil {
		return Result{Err: errorf(CodeNoSession, "session %d not found", c.Session)}
	}
	var names []string
	if c.Auth != "" {
		names = c.names()
	}
	if err := t.authorize(c.Auth, s, AccessWrite, names...); err != nil {
		return Result{Err: err}
	}
	if c.RequestID != "" {
		if r := t.requests.of(s, c.RequestID); r != nil {
			return Result{Request: t.requestInfo(r)} // a retry: never enqueue twice
		}
		if !c.SessionScoped && t.requests.withID(c.RequestID) != nil {
			return Result{Err: errorf(CodeInvalid, "request_id %q belongs to another session", c.RequestID)}
		}
	}
	req, need := fillDefaults(c)
	specs := c.Locks
	if err := t.admissible(c, s); err != nil {
		return Result{Err: err}
	}

	id := c.RequestID
	if id == "" {
		id = "~auto-" + strconv.FormatUint(t.index, 10)
	}
	t.seq++
	r := &request{id: id, s: s, seq: t.seq, specs: specs, require: req, need: need,
		holdTTL: c.HoldTTL, status: Pending, created: t.index}
	t.requests.add(r)

	var canGrantBuf [8]bool
	var pickBuf [8]int
	canGrant := canGrantBuf[:0]
	made := len(t.touched) // ensure appends the nodes it makes
	for i, sp := range specs {
		n := t.ensure(sp.Name)
		canGrant = append(canGrant, t.grantable(r, i, n, s.holds[n] != nil))
	}
	switch chosen := quorum.AppendPick(pickBuf[:0], need, canGrant); {
	case chosen != nil:
		t.grant(r, chosen)
	case c.Wait == 0:
		t.finish(r, TimedOut)
	default:
		if err := c.Limits.checkQueue(t, r); err != nil {
			t.requests.remove(r) // as if it never came: nothing else has seen r
			t.seq--
			t.unmake(made)
			return Result{Err: err}
		}
		r.deadline = t.clock + int64(c.Wait)
		t.enqueue(r)
		t.addDeadline(&deadline{at: r.deadline, kind: dlWait, seq: r.seq, r: r})
		t.detectQueued()
		if r.status == Pending {
			for _, w := range r.waiters {
				t.touch(w.n)
			}
		}
	}
	return Result{Request: t.requestInfo(r)}
}

// admissible checks a new request against the table: semaphore limits and
// weights, ordered locking, the holds limit.
func (t *Table) admissible(c *Acquire, s *session) *Error {
	for _, sp := range c.Locks {
		n := t.nodes[sp.Name]
		if n != nil && n.inUse() && sp.Limit != 0 && sp.Limit != n.limit {
			return errorf(CodeLimitMismatch, "lock %q has limit %d, request says %d", sp.Name, n.limit, sp.Limit)
		}
		lim := max(sp.Limit, 1)
		if n != nil {
			lim = n.limitFor(sp)
		}
		if sp.Weight > lim {
			return errorf(CodeInvalid, "lock %q: weight %d is over its limit %d", sp.Name, sp.Weight, lim)
		}
	}
	if s.ordered {
		if err := t.checkOrder(s, c.Locks); err != nil {
			return err
		}
	}
	return c.Limits.checkHolds(t, s, c.Locks)
}

// HasValues reports whether a lock of the acquire gives its hold a value:
// such an entry needs a log format that carries values (fsm's MinFormat
// asks), which a voter of an older build would not apply.
func (c *Acquire) HasValues() bool {
	for _, sp := range c.Locks {
		if sp.Value != "" {
			return true
		}
	}
	return false
}

// names returns the names the request asks for.
func (c *Acquire) names() []string {
	names := make([]string, len(c.Locks))
	for i, sp := range c.Locks {
		names[i] = sp.Name
	}
	return names
}

// checkOrder enforces ordered locking: every name not already held must sort
// after every name the session holds or waits for.
func (t *Table) checkOrder(s *session, specs []LockSpec) *Error {
	top := ""
	for n := range s.holds {
		top = max(top, n.name)
	}
	for _, p := range s.pending {
		for _, sp := range p.specs {
			top = max(top, sp.Name)
		}
	}
	for _, sp := range specs {
		if n := t.nodes[sp.Name]; n != nil && s.holds[n] != nil {
			continue
		}
		if sp.Name <= top {
			return errorf(CodePoorlyOrdered, "ordered session: %q does not sort after %q", sp.Name, top)
		}
	}
	return nil
}

// requestInfo returns the public view of r as of now. A granted request
// says "granted" only while its session still holds every name it was
// granted with the token it was granted: after its hold ended (release,
// hold_ttl, surrender, a deadlock surrender) it says "released", so an
// idempotent retry or a re-attach is never told it holds a lock that
// another session may hold now. A later upgrade changes the hold's token
// and makes it say "released" too: erring on the side that never lets two
// clients believe they hold conflicting locks.
func (t *Table) requestInfo(r *request) *RequestInfo {
	info := r.info()
	if r.status != Granted {
		return info
	}
	for _, g := range r.granted {
		n := t.nodes[g.Name]
		if n == nil {
			info.Status = Released
			break
		}
		if h := r.s.holds[n]; h == nil || h.token != g.Token {
			info.Status = Released
			break
		}
	}
	return info
}

// info returns the public view of r as recorded.
func (r *request) info() *RequestInfo {
	// specs never change and granted is complete once set: share them.
	return &RequestInfo{
		ID: r.id, Session: r.s.id, Key: r.s.key, Owner: r.s.owner, Status: r.status, Token: r.token,
		Granted: r.granted, Locks: r.specs,
		Seq: r.seq, Created: r.created, Ended: r.ended, Deadline: r.deadline,
	}
}

// sortNames sorts names byte-wise, for deterministic output.
func sortNames(names []string) { slices.SortFunc(names, strings.Compare) }
