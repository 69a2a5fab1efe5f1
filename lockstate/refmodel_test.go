package lockstate

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lockd/lockd/quorum"
)

// refTable is a brute-force reference implementation of the lock table,
// written from the rules rather than from the engine: plain slices of holds
// and pending requests, every question answered by scanning all of them.
// It has no queues, no aggregate counters, no wake-up lists and no deadline
// heap: settling means "grant the earliest grantable pending request, and
// again, until none is", so a wake-up the engine forgets, a counter that
// drifts or a heap entry that is skipped shows up as a different outcome.
//
// It models every command, deadlock resolution included. Where the rules
// leave a choice open it makes the one the package documents: deadlines
// fire in (time, kind, name, session, arrival) order with a settle after
// each; closing a session cancels its requests (arrival order) and then
// releases its holds (name order); a newly queued request first looks for
// a cycle whose first edge is its own, by depth-first search visiting
// sessions in id order, then, after a resolution, for any cycle through
// the sessions involved; a session that gained wait-for edges other than
// by queueing (an upgrade granted, a hold dropped under its own queued
// upgrade) is searched from at the end of the entry, in the order that
// happened. The victim and what it gives up follow the rules.
type refTable struct {
	index      uint64
	clock      int64
	seq        uint64
	sessions   map[SessionID]*refSession
	holds      []*refHold         // grant order
	pending    []*refReq          // arrival order
	reqs       map[reqKey]*refReq // by session and id
	remembered []*refReq          // requests in arrival order; those no longer in reqs are dropped lazily
	delays     map[string]int64   // lock-delay end per name
	limits     map[string]int     // semaphore size of every name in use
	events     []Event
	suspects   []SessionID // sessions that gained wait-for edges other than by queueing
}

type refSession struct {
	id         SessionID
	name       string
	ttl        time.Duration
	onDeadlock OnDeadlock
	ordered    bool
	lockDelay  time.Duration
	done       []*refReq
}

type refHold struct {
	sess    SessionID
	name    string
	mode    Mode
	weight  int
	count   int
	token   uint64
	expires int64
	value   string
}

type refReq struct {
	id       string
	sess     SessionID
	seq      uint64
	specs    []LockSpec
	need     int
	holdTTL  time.Duration
	deadline int64
	restore  int
	upgrade  []bool // the session held the name when the request was queued
	status   Status
	token    uint64
	granted  []Grant
	created  uint64
	ended    uint64
}

// refResult is what the model predicts for one entry.
type refResult struct {
	err      Code // "" for success
	session  SessionID
	request  *RequestInfo
	released []string
	kept     bool
	proclaim *Proclamation // Version left 0: the model keeps no versions
	events   []Event
}

func newRefTable() *refTable {
	return &refTable{
		sessions: make(map[SessionID]*refSession),
		reqs:     make(map[reqKey]*refReq),
		delays:   make(map[string]int64),
		limits:   make(map[string]int),
	}
}

// ---- pure helpers (deliberately not the engine's) -------------------------

// refRelated reports whether a and b are equal or one is an ancestor of the
// other.
func refRelated(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// refParent returns the name one segment up, "" at the top.
func refParent(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return ""
}

// refModesConflict is the mode matrix: only read/read is compatible.
func refModesConflict(a, b Mode) bool { return a == Write || b == Write }

func refValidName(name string) bool {
	if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
		return false
	}
	segs := strings.Split(name, "/")
	if len(segs) > MaxSegments {
		return false
	}
	for _, s := range segs {
		if s == "" || len(s) > MaxSegmentLen {
			return false
		}
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] == 0x7f {
				return false
			}
		}
	}
	return true
}

// refValidValue: a hold's value is UTF-8 of at most MaxValueLen bytes.
func refValidValue(v string) bool { return len(v) <= MaxValueLen && utf8.ValidString(v) }

// ---- queries -------------------------------------------------------------

func (m *refTable) holdOf(s SessionID, name string) *refHold {
	for _, h := range m.holds {
		if h.sess == s && h.name == name {
			return h
		}
	}
	return nil
}

func (m *refTable) used(name string) bool {
	for _, h := range m.holds {
		if h.name == name {
			return true
		}
	}
	for _, r := range m.pending {
		for _, sp := range r.specs {
			if sp.Name == name {
				return true
			}
		}
	}
	return false
}

// gcLimits forgets the limit of every name that is no longer in use.
func (m *refTable) gcLimits() {
	for name := range m.limits {
		if !m.used(name) {
			delete(m.limits, name)
		}
	}
}

// sameNameConflict reports whether another session's hold h on sp's own
// name conflicts with granting sp to session s (semaphore writes share
// while the weights fit).
func (m *refTable) sameNameConflict(s SessionID, h *refHold, sp LockSpec) bool {
	switch {
	case h.mode == Read && sp.Mode == Read:
		return false
	case h.mode == Write && sp.Mode == Write:
		sum := sp.Weight
		for _, o := range m.holds {
			if o.name == sp.Name && o.sess != s && o.mode == Write {
				sum += o.weight
			}
		}
		return sum > m.limits[sp.Name]
	}
	return true
}

// holdBlocked reports whether a hold of another session, or a lock-delay,
// keeps sp from being granted to s.
func (m *refTable) holdBlocked(s SessionID, sp LockSpec) bool {
	for name := range m.delays {
		if refRelated(name, sp.Name) {
			return true
		}
	}
	for _, h := range m.holds {
		if h.sess == s || !refRelated(h.name, sp.Name) {
			continue
		}
		if h.name == sp.Name {
			if m.sameNameConflict(s, h, sp) {
				return true
			}
		} else if refModesConflict(h.mode, sp.Mode) {
			return true
		}
	}
	return false
}

// waitBlocked reports whether a request that arrived before seq (of any
// session) waits for a lock that conflicts with sp.
func (m *refTable) waitBlocked(seq uint64, sp LockSpec) bool {
	for _, p := range m.pending {
		if p.seq >= seq {
			continue
		}
		for _, q := range p.specs {
			if refRelated(q.Name, sp.Name) && refModesConflict(q.Mode, sp.Mode) {
				return true
			}
		}
	}
	return false
}

// grantable decides one constituent of r by the rules.
func (m *refTable) grantable(r *refReq, i int) bool {
	sp := r.specs[i]
	if r.upgrade[i] {
		if h := m.holdOf(r.sess, sp.Name); h != nil {
			if h.mode >= sp.Mode && h.weight >= sp.Weight {
				return true // reentrant
			}
			return !m.holdBlocked(r.sess, sp) // upgrade: holders only
		}
	}
	return !m.holdBlocked(r.sess, sp) && !m.waitBlocked(r.seq, sp)
}

// choose returns the first need grantable constituents, or nil.
func (m *refTable) choose(r *refReq) []int {
	var chosen []int
	for i := range r.specs {
		if m.grantable(r, i) {
			chosen = append(chosen, i)
			if len(chosen) == r.need {
				return chosen
			}
		}
	}
	return nil
}

// ---- changes -------------------------------------------------------------

func (m *refTable) emit(kind EventKind, s SessionID, reqID, name string, token uint64) {
	m.events = append(m.events, Event{Kind: kind, Session: s, RequestID: reqID, Name: name, Token: token})
}

func (m *refTable) unpend(r *refReq) {
	m.pending = slices.DeleteFunc(m.pending, func(x *refReq) bool { return x == r })
}

func (m *refTable) finish(r *refReq, st Status) {
	r.status, r.ended = st, m.index
	s := m.sessions[r.sess]
	s.done = append(s.done, r)
	if len(s.done) > DoneRequestsKept {
		old := s.done[0]
		s.done = s.done[1:]
		if m.reqs[old.key()] == old {
			delete(m.reqs, old.key())
		}
	}
}

func (m *refTable) fail(r *refReq, st Status, kind EventKind) {
	m.unpend(r)
	m.gcLimits()
	m.finish(r, st)
	m.emit(kind, r.sess, r.id, "", 0)
}

func (m *refTable) grant(r *refReq, chosen []int) {
	for _, i := range chosen {
		sp := r.specs[i]
		if !m.used(sp.Name) {
			m.limits[sp.Name] = max(sp.Limit, 1)
		}
		h := m.holdOf(r.sess, sp.Name)
		isNew := h == nil
		switch {
		case isNew:
			h = &refHold{sess: r.sess, name: sp.Name, mode: sp.Mode, weight: sp.Weight, count: max(r.restore, 1), token: m.index, value: sp.Value}
			m.holds = append(m.holds, h)
			m.suspectNewEdges(r, sp.Name)
		case sp.Mode > h.mode || sp.Weight > h.weight:
			h.mode, h.weight = max(h.mode, sp.Mode), max(h.weight, sp.Weight)
			h.count++
			h.token = m.index
			m.suspect(r.sess) // waiters it overtook now wait for it
			m.suspectNewEdges(r, sp.Name)
		default:
			h.count++
		}
		if !isNew && sp.Value != "" {
			h.value = sp.Value
		}
		switch {
		case r.holdTTL == 0:
			h.expires = 0
		case isNew || h.expires != 0:
			h.expires = max(h.expires, m.clock+int64(r.holdTTL))
		}
		r.granted = append(r.granted, Grant{Name: sp.Name, Mode: h.mode, Weight: h.weight, Token: h.token})
		r.token = max(r.token, h.token)
		m.emit(EvGranted, r.sess, r.id, sp.Name, h.token)
	}
	m.unpend(r)
	m.gcLimits()
	m.finish(r, Granted)
}

// suspectNewEdges marks, in the engine's order, the sessions that a new or
// stronger hold on name may make wait for a holder they did not wait for:
// upgrades on name and its ancestors (nearest first), upgrades below it,
// and write waiters on name when it is a semaphore. granting is the request
// being granted: it is no longer queued.
func (m *refTable) suspectNewEdges(granting *refReq, name string) {
	each := func(match func(sp LockSpec, upg bool) bool) {
		for _, p := range m.pending {
			if p == granting {
				continue
			}
			for i, sp := range p.specs {
				if match(sp, p.upgrade[i]) {
					m.suspect(p.sess)
				}
			}
		}
	}
	for a := name; a != ""; a = refParent(a) {
		each(func(sp LockSpec, upg bool) bool { return upg && sp.Name == a })
	}
	each(func(sp LockSpec, upg bool) bool {
		return upg && len(sp.Name) > len(name) && strings.HasPrefix(sp.Name, name+"/")
	})
	if m.limits[name] > 1 {
		each(func(sp LockSpec, _ bool) bool { return sp.Name == name && sp.Mode == Write })
	}
}

func (m *refTable) dropHold(h *refHold, kind EventKind) {
	m.holds = slices.DeleteFunc(m.holds, func(x *refHold) bool { return x == h })
	for _, r := range m.pending {
		for i, sp := range r.specs {
			if r.sess == h.sess && sp.Name == h.name && r.upgrade[i] {
				m.suspect(h.sess) // its upgrade now waits for earlier waiters too
			}
		}
	}
	m.gcLimits()
	m.emit(kind, h.sess, "", h.name, h.token)
}

// enqueue queues r; its upgrade flags say which names its session holds now.
func (m *refTable) enqueue(r *refReq) {
	r.upgrade = make([]bool, len(r.specs))
	for i, sp := range r.specs {
		r.upgrade[i] = m.holdOf(r.sess, sp.Name) != nil
		if !m.used(sp.Name) {
			m.limits[sp.Name] = max(sp.Limit, 1)
		}
	}
	m.pending = append(m.pending, r)
}

// settle grants, repeatedly, the earliest pending request that can be.
func (m *refTable) settle() {
	for {
		progressed := false
		for _, r := range m.pending {
			if chosen := m.choose(r); chosen != nil {
				m.grant(r, chosen)
				progressed = true
				break
			}
		}
		if !progressed {
			return
		}
	}
}

// ---- deadlines -----------------------------------------------------------

type refDeadline struct {
	at   int64
	kind int // 0 hold, 1 delay, 2 wait
	name string
	sess SessionID
	seq  uint64
	h    *refHold
	r    *refReq
}

func (a refDeadline) less(b refDeadline) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	if a.name != b.name {
		return a.name < b.name
	}
	if a.sess != b.sess {
		return a.sess < b.sess
	}
	return a.seq < b.seq
}

// nextDue returns the earliest deadline at or before the clock.
func (m *refTable) nextDue() (refDeadline, bool) {
	var best refDeadline
	found := false
	consider := func(d refDeadline) {
		if d.at <= m.clock && (!found || d.less(best)) {
			best, found = d, true
		}
	}
	for _, h := range m.holds {
		if h.expires != 0 {
			consider(refDeadline{at: h.expires, kind: 0, name: h.name, sess: h.sess, h: h})
		}
	}
	for name, until := range m.delays {
		consider(refDeadline{at: until, kind: 1, name: name})
	}
	for _, r := range m.pending {
		if r.deadline != 0 {
			consider(refDeadline{at: r.deadline, kind: 2, seq: r.seq, r: r})
		}
	}
	return best, found
}

// nextDeadline is what Table.NextDeadline must say.
func (m *refTable) nextDeadline() (int64, bool) {
	var at int64
	found := false
	for _, h := range m.holds {
		if h.expires != 0 && (!found || h.expires < at) {
			at, found = h.expires, true
		}
	}
	for _, until := range m.delays {
		if !found || until < at {
			at, found = until, true
		}
	}
	for _, r := range m.pending {
		if r.deadline != 0 && (!found || r.deadline < at) {
			at, found = r.deadline, true
		}
	}
	return at, found
}

func (m *refTable) fireDeadlines() {
	for {
		d, ok := m.nextDue()
		if !ok {
			return
		}
		switch d.kind {
		case 0:
			m.dropHold(d.h, EvExpired)
		case 1:
			delete(m.delays, d.name)
		case 2:
			m.fail(d.r, TimedOut, EvTimeout)
		}
		m.settle()
	}
}

// ---- the wait-for graph and deadlocks --------------------------------------

// blockers calls fn for every session constituent i of pending r waits
// for: other sessions' conflicting holds (h set) and other sessions'
// earlier conflicting waiters (h nil).
func (m *refTable) blockers(r *refReq, i int, fn func(s SessionID, h *refHold)) {
	sp := r.specs[i]
	for _, h := range m.holds {
		if h.sess == r.sess || !refRelated(h.name, sp.Name) {
			continue
		}
		if (h.name == sp.Name && m.sameNameConflict(r.sess, h, sp)) ||
			(h.name != sp.Name && refModesConflict(h.mode, sp.Mode)) {
			fn(h.sess, h)
		}
	}
	if r.upgrade[i] && m.holdOf(r.sess, sp.Name) != nil {
		return // an upgrade waits for holders only
	}
	for _, p := range m.pending {
		if p.seq >= r.seq || p.sess == r.sess {
			continue
		}
		for _, q := range p.specs {
			if refRelated(q.Name, sp.Name) && refModesConflict(q.Mode, sp.Mode) {
				fn(p.sess, nil)
			}
		}
	}
}

// waitsFor returns the sessions u waits for, sorted by id. With via set,
// only via's edges count.
func (m *refTable) waitsFor(u SessionID, via *refReq) []SessionID {
	var out []SessionID
	for _, r := range m.pending {
		if r.sess != u || (via != nil && r != via) {
			continue
		}
		for i := range r.specs {
			m.blockers(r, i, func(s SessionID, _ *refHold) {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			})
		}
	}
	slices.Sort(out)
	return out
}

// edges returns the whole wait-for graph, sorted.
func (m *refTable) edges() []Edge {
	var out []Edge
	for _, id := range m.sessionIDs() {
		for _, v := range m.waitsFor(id, nil) {
			out = append(out, Edge{From: id, To: v, FromKey: PublicID(id, ""), ToKey: PublicID(v, "")})
		}
	}
	return out
}

func (m *refTable) sessionIDs() []SessionID {
	ids := make([]SessionID, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// findCycle returns the first cycle through start that a depth-first
// search visiting sessions in id order finds, start first. With via set,
// the cycle's first edge must be one of via's.
func (m *refTable) findCycle(start SessionID, via *refReq) []SessionID {
	visited := map[SessionID]bool{}
	var path []SessionID
	var dfs func(u SessionID) bool
	dfs = func(u SessionID) bool {
		path = append(path, u)
		visited[u] = true
		first := via
		if u != start {
			first = nil
		}
		for _, v := range m.waitsFor(u, first) {
			if v == start || (!visited[v] && dfs(v)) {
				return true
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if dfs(start) {
		return path
	}
	return nil
}

func (m *refTable) hasPending(s SessionID) bool {
	for _, r := range m.pending {
		if r.sess == s {
			return true
		}
	}
	return false
}

func (m *refTable) suspect(s SessionID) {
	if !slices.Contains(m.suspects, s) {
		m.suspects = append(m.suspects, s)
	}
}

// recheck breaks the cycles through the suspects, in the order they became
// suspects, settling after each.
func (m *refTable) recheck() {
	for len(m.suspects) > 0 {
		s := m.suspects[0]
		m.suspects = m.suspects[1:]
		if m.sessions[s] != nil && m.hasPending(s) {
			m.detect(s, nil)
			m.settle()
		}
	}
}

// detect breaks every cycle through start. With via set (a request start
// has just queued) the first search only looks for a cycle whose first
// edge is one of via's; later searches (after a resolution) for any.
func (m *refTable) detect(start SessionID, via *refReq) {
	work := []SessionID{start}
	for steps := 0; len(work) > 0 && steps < 10000; steps++ {
		s := work[0]
		if m.sessions[s] == nil || !m.hasPending(s) || (via != nil && via.status != Pending) {
			work, via = work[1:], nil
			continue
		}
		cyc := m.findCycle(s, via)
		via = nil
		if cyc == nil {
			work = work[1:]
			continue
		}
		if again, ok := m.resolve(cyc); ok {
			work = append(work, again)
		}
	}
}

// resolve breaks one cycle: the youngest session is the victim.
func (m *refTable) resolve(cyc []SessionID) (SessionID, bool) {
	vi := 0
	for i, s := range cyc {
		if s > cyc[vi] {
			vi = i
		}
	}
	v := cyc[vi]
	succ, pred := cyc[(vi+1)%len(cyc)], cyc[(vi+len(cyc)-1)%len(cyc)]
	if m.sessions[v].onDeadlock == SurrenderLock {
		var hs []*refHold
		for _, r := range m.pending {
			if r.sess != pred {
				continue
			}
			for i := range r.specs {
				m.blockers(r, i, func(s SessionID, h *refHold) {
					if s == v && h != nil && !slices.Contains(hs, h) {
						hs = append(hs, h)
					}
				})
			}
		}
		if len(hs) > 0 {
			slices.SortFunc(hs, func(a, b *refHold) int { return strings.Compare(a.name, b.name) })
			for _, h := range hs {
				m.surrender(h)
			}
			m.settle()
			return v, true
		}
	}
	var victims []*refReq
	for _, r := range m.pending {
		if r.sess != v {
			continue
		}
		hit := false
		for i := range r.specs {
			m.blockers(r, i, func(s SessionID, _ *refHold) { hit = hit || s == succ })
		}
		if hit {
			victims = append(victims, r)
		}
	}
	for _, r := range victims {
		m.fail(r, Deadlock, EvDeadlock)
	}
	m.settle()
	return 0, false
}

// surrender gives h up and queues its session for it again, last.
func (m *refTable) surrender(h *refHold) *refReq {
	m.seq++
	r := &refReq{
		id: fmt.Sprintf("~surrender-%d", m.seq), sess: h.sess, seq: m.seq,
		specs: []LockSpec{{Name: h.name, Mode: h.mode, Weight: h.weight, Limit: m.limits[h.name], Value: h.value}},
		need:  1, restore: h.count, status: Pending, created: m.index,
	}
	m.reqs[r.key()] = r
	m.remembered = append(m.remembered, r)
	m.dropHold(h, EvSurrendered)
	m.enqueue(r)
	return r
}

// ---- commands ------------------------------------------------------------

// Apply applies one entry and predicts its result.
func (m *refTable) Apply(e Entry) refResult {
	if e.Index <= m.index {
		return refResult{err: CodeInvalid}
	}
	m.index = e.Index
	m.clock = max(m.clock, e.Now)
	m.events = nil
	m.fireDeadlines()
	res := refResult{err: CodeInvalid}
	if refValidContent(e.Cmd) {
		res = m.applyCmd(e.Cmd)
	}
	m.settle()
	m.recheck()
	res.events, m.events = m.events, nil
	return res
}

// applyCmd applies a command whose content is valid.
func (m *refTable) applyCmd(cmd Command) refResult {
	var res refResult
	switch c := cmd.(type) {
	case *CreateSession:
		res = m.createSession(c)
	case *CloseSession:
		res = m.endSession(c.Session, false)
	case *ExpireSession:
		res = m.endSession(c.Session, true)
	case *ExpireSessions:
		for _, id := range c.Sessions {
			if m.sessions[id] != nil {
				m.endSession(id, true)
			}
		}
	case *Acquire:
		res = m.acquire(c)
	case *Release:
		res = m.release(c)
	case *Surrender:
		res = m.surrenderCmd(c)
	case *Cancel:
		res = m.cancel(c)
	case *Proclaim:
		res = m.proclaim(c)
	}
	return res
}

func (m *refTable) createSession(c *CreateSession) refResult {
	od := c.OnDeadlock
	if od == "" {
		od = Abort
	}
	id := SessionID(m.index)
	m.sessions[id] = &refSession{id: id, name: c.Name, ttl: c.TTL, onDeadlock: od, ordered: c.Ordered, lockDelay: c.LockDelay}
	m.emit(EvSessionCreated, id, "", "", 0)
	return refResult{session: id}
}

func (m *refTable) endSession(id SessionID, expired bool) refResult {
	s := m.sessions[id]
	if s == nil {
		return refResult{err: CodeNoSession}
	}
	for _, r := range slices.Clone(m.pending) {
		if r.sess == id {
			m.fail(r, Cancelled, EvCancelled)
		}
	}
	var mine []*refHold
	for _, h := range m.holds {
		if h.sess == id {
			mine = append(mine, h)
		}
	}
	slices.SortFunc(mine, func(a, b *refHold) int { return strings.Compare(a.name, b.name) })
	kind := EvReleased
	if expired {
		kind = EvExpired
	}
	for _, h := range mine {
		m.dropHold(h, kind)
		if expired && s.lockDelay > 0 {
			if until := m.clock + int64(s.lockDelay); until > m.delays[h.name] {
				m.delays[h.name] = until
			}
		}
	}
	for _, r := range s.done {
		if m.reqs[r.key()] == r {
			delete(m.reqs, r.key())
		}
	}
	delete(m.sessions, id)
	if expired {
		m.emit(EvSessionExpired, id, "", "", 0)
	} else {
		m.emit(EvSessionClosed, id, "", "", 0)
	}
	return refResult{}
}

func refValidRequestID(id string) bool {
	if len(id) > MaxRequestIDLen || !utf8.ValidString(id) || id[0] == '~' {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f || c == '/' {
			return false
		}
	}
	return true
}

// refValidContent decides from the command alone whether it is well
// formed: every command is checked for content before the table is looked
// at, so bad content is invalid_request whatever the table holds.
func refValidContent(cmd Command) bool {
	switch c := cmd.(type) {
	case *CreateSession:
		return c.TTL >= MinTTL && c.TTL <= MaxTTL && c.LockDelay >= 0 && c.LockDelay <= MaxLockDelay &&
			len(c.Name) <= MaxSessionName && utf8.ValidString(c.Name) &&
			(c.OnDeadlock == "" || c.OnDeadlock == Abort || c.OnDeadlock == SurrenderLock)
	case *CloseSession:
		return c.Session != 0
	case *ExpireSession:
		return c.Session != 0
	case *ExpireSessions:
		return len(c.Sessions) >= 1 && len(c.Sessions) <= MaxExpireBatch && !slices.Contains(c.Sessions, 0) &&
			len(slices.Compact(slices.Sorted(slices.Values(c.Sessions)))) == len(c.Sessions)
	case *Acquire:
		return refValidAcquire(c)
	case *Release:
		return c.Session != 0 && (c.Name == "") != (c.RequestID == "") && (c.Name == "" || refValidName(c.Name))
	case *Surrender:
		return c.Session != 0 && refValidName(c.Name)
	case *Cancel:
		return c.RequestID != "" && len(c.RequestID) <= MaxRequestIDLen
	case *Proclaim:
		return c.Session != 0 && refValidName(c.Name) && refValidValue(c.Value)
	case *Tick:
		return true
	}
	return false
}

func refValidAcquire(c *Acquire) bool {
	if c.Session == 0 || (c.RequestID != "" && !refValidRequestID(c.RequestID)) ||
		len(c.Locks) == 0 || len(c.Locks) > MaxLocksPerReq ||
		c.Wait < 0 || c.Wait > MaxWait || c.HoldTTL < 0 || c.HoldTTL > MaxHoldTTL {
		return false
	}
	if _, err := quorum.Parse(string(c.Require)); err != nil {
		return false
	}
	seen := map[string]bool{}
	for _, sp := range c.Locks {
		if sp.Weight == 0 {
			sp.Weight = 1
		}
		if seen[sp.Name] || !refValidName(sp.Name) || (sp.Mode != Read && sp.Mode != Write) ||
			sp.Limit < 0 || sp.Limit > MaxLimit || sp.Weight < 1 || (sp.Mode == Read && sp.Weight != 1) ||
			(sp.Limit > 0 && sp.Weight > sp.Limit) || !refValidValue(sp.Value) {
			return false
		}
		seen[sp.Name] = true
	}
	return true
}

func (m *refTable) acquire(c *Acquire) refResult {
	s := m.sessions[c.Session]
	if s == nil {
		return refResult{err: CodeNoSession}
	}
	if c.RequestID != "" {
		if r := m.reqs[reqKey{s.id, c.RequestID}]; r != nil {
			return refResult{request: m.view(r)}
		}
		for k := range m.reqs {
			if k.id == c.RequestID && !c.SessionScoped {
				return refResult{err: CodeInvalid} // another session's, before ids were scoped
			}
		}
	}
	req, _ := quorum.Parse(string(c.Require))
	need, _ := req.Need(len(c.Locks))
	specs := make([]LockSpec, len(c.Locks))
	for i, sp := range c.Locks {
		if sp.Weight == 0 {
			sp.Weight = 1
		}
		specs[i] = sp
	}
	for _, sp := range specs {
		lim, inUse := m.limits[sp.Name]
		if inUse && sp.Limit != 0 && sp.Limit != lim {
			return refResult{err: CodeLimitMismatch}
		}
		if !inUse {
			lim = max(sp.Limit, 1)
		}
		if sp.Weight > lim {
			return refResult{err: CodeInvalid}
		}
	}
	if s.ordered {
		top := ""
		for _, h := range m.holds {
			if h.sess == s.id {
				top = max(top, h.name)
			}
		}
		for _, p := range m.pending {
			if p.sess == s.id {
				for _, sp := range p.specs {
					top = max(top, sp.Name)
				}
			}
		}
		for _, sp := range specs {
			if m.holdOf(s.id, sp.Name) == nil && sp.Name <= top {
				return refResult{err: CodePoorlyOrdered}
			}
		}
	}
	id := c.RequestID
	if id == "" {
		id = fmt.Sprintf("~auto-%d", m.index)
	}
	m.seq++
	r := &refReq{id: id, sess: s.id, seq: m.seq, specs: specs, need: need, holdTTL: c.HoldTTL,
		status: Pending, created: m.index}
	m.reqs[r.key()] = r
	m.remembered = append(m.remembered, r)
	r.upgrade = make([]bool, len(specs))
	for i, sp := range specs {
		r.upgrade[i] = m.holdOf(s.id, sp.Name) != nil
	}
	switch chosen := m.choose(r); {
	case chosen != nil:
		m.grant(r, chosen)
	case c.Wait == 0:
		m.finish(r, TimedOut)
	default:
		r.deadline = m.clock + int64(c.Wait)
		m.enqueue(r)
		m.detect(s.id, r)
	}
	return refResult{request: m.view(r)}
}

func (m *refTable) release(c *Release) refResult {
	s := m.sessions[c.Session]
	if s == nil {
		return refResult{err: CodeNoSession}
	}
	var names []string
	if c.Name != "" {
		names = []string{c.Name}
	} else {
		r := m.reqs[reqKey{s.id, c.RequestID}]
		if r == nil {
			return refResult{err: CodeNoRequest}
		}
		if r.status != Granted {
			return refResult{err: CodeNotHeld}
		}
		for _, g := range r.granted {
			if m.holdOf(s.id, g.Name) != nil {
				names = append(names, g.Name)
			}
		}
	}
	for _, name := range names {
		if m.holdOf(s.id, name) == nil {
			return refResult{err: CodeNotHeld}
		}
	}
	if len(names) == 0 {
		return refResult{err: CodeNotHeld}
	}
	for _, name := range names {
		h := m.holdOf(s.id, name)
		if h.count--; h.count == 0 {
			m.dropHold(h, EvReleased)
		}
	}
	if c.RequestID != "" {
		m.reqs[reqKey{s.id, c.RequestID}].status = Released // a second release by id is not_held
	}
	return refResult{released: names}
}

func (m *refTable) surrenderCmd(c *Surrender) refResult {
	s := m.sessions[c.Session]
	if s == nil {
		return refResult{err: CodeNoSession}
	}
	h := m.holdOf(s.id, c.Name)
	if h == nil {
		return refResult{err: CodeNotHeld}
	}
	blocks := false
	for _, p := range m.pending {
		if p.sess == s.id {
			continue
		}
		for _, q := range p.specs {
			if refRelated(q.Name, h.name) && refModesConflict(q.Mode, h.mode) {
				blocks = true
			}
		}
	}
	if !blocks {
		return refResult{kept: true}
	}
	r := m.surrender(h)
	m.detect(r.sess, r)
	return refResult{}
}

// proclaim sets the value of a hold the session has now (with the token
// it names, if it names one); the same value again changes nothing.
func (m *refTable) proclaim(c *Proclaim) refResult {
	if m.sessions[c.Session] == nil {
		return refResult{err: CodeNoSession}
	}
	h := m.holdOf(c.Session, c.Name)
	if h == nil || (c.Token != 0 && h.token != c.Token) {
		return refResult{err: CodeNotHeld}
	}
	if h.value != c.Value {
		h.value = c.Value
		m.emit(EvProclaimed, h.sess, "", h.name, h.token)
	}
	return refResult{proclaim: &Proclamation{Name: h.name, Token: h.token, Value: h.value}}
}

func (m *refTable) cancel(c *Cancel) refResult {
	var found []*refReq
	for k, r := range m.reqs {
		if k.id == c.RequestID && (c.Session == 0 || k.s == c.Session) {
			found = append(found, r)
		}
	}
	switch {
	case len(found) == 0:
		return refResult{err: CodeNoRequest}
	case len(found) > 1:
		return refResult{err: CodeInvalid} // which session's: the cancel must say
	}
	r := found[0]
	if r.status == Pending {
		m.fail(r, Cancelled, EvCancelled)
	}
	return refResult{request: m.view(r)}
}

// view is what a client is told about r: a granted request whose holds
// are gone (or whose token changed) reads "released".
func (m *refTable) view(r *refReq) *RequestInfo {
	info := r.info()
	if r.status == Granted {
		for _, g := range r.granted {
			if h := m.holdOf(r.sess, g.Name); h == nil || h.token != g.Token {
				info.Status = Released
				break
			}
		}
	}
	return info
}

func (r *refReq) key() reqKey { return reqKey{r.sess, r.id} }

func (r *refReq) info() *RequestInfo {
	return &RequestInfo{
		ID: r.id, Session: r.sess, Status: r.status, Token: r.token,
		Granted: slices.Clone(r.granted), Locks: slices.Clone(r.specs),
		Seq: r.seq, Created: r.created, Ended: r.ended, Deadline: r.deadline,
	}
}

// refFromTable builds a model holding t's state, read from its Export, to
// carry on after a tolerated deviation.
func refFromTable(t *Table) *refTable {
	m := newRefTable()
	m.index, m.clock = t.Index(), t.Clock()
	done := map[SessionID][]string{}
	_ = t.Export(func(rec Record) error {
		switch r := rec.(type) {
		case *Header:
			m.seq = r.Seq
		case *SessionRecord:
			m.sessions[r.ID] = &refSession{id: r.ID, name: r.Name, ttl: r.TTL, onDeadlock: r.OnDeadlock,
				ordered: r.Ordered, lockDelay: r.LockDelay}
			done[r.ID] = r.Done
		case *NodeRecord:
			if r.DelayUntil != 0 {
				m.delays[r.Name] = r.DelayUntil
			}
			if r.Limit != 0 {
				m.limits[r.Name] = r.Limit
			}
			for _, h := range r.Holds {
				m.holds = append(m.holds, &refHold{sess: h.Session, name: r.Name, mode: h.Mode, weight: h.Weight,
					count: h.Count, token: h.Token, expires: h.Expires, value: h.Value})
			}
		case *RequestRecord:
			q := &refReq{id: r.ID, sess: r.Session, seq: r.Seq, specs: slices.Clone(r.Locks), need: r.Need,
				holdTTL: r.HoldTTL, deadline: r.Deadline, restore: r.Restore, upgrade: slices.Clone(r.Upgrade),
				status: r.Status, token: r.Token, granted: slices.Clone(r.Granted), created: r.Created, ended: r.Ended}
			m.reqs[q.key()] = q
			m.remembered = append(m.remembered, q)
			if q.status == Pending {
				m.pending = append(m.pending, q)
			}
		}
		return nil
	})
	for id, ids := range done {
		for _, rid := range ids {
			m.sessions[id].done = append(m.sessions[id].done, m.reqs[reqKey{id, rid}])
		}
	}
	return m
}
