package lockstate

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Holder is one hold as seen from outside.
type Holder struct {
	Session SessionID `json:"session" msgpack:"session"`
	Key     string    `json:"key" msgpack:"key,omitempty"` // the session's public id
	Mode    Mode      `json:"mode" msgpack:"mode"`
	Weight  int       `json:"weight" msgpack:"weight"`
	Count   int       `json:"count" msgpack:"count"`
	Token   uint64    `json:"token" msgpack:"token"`                         // the index of the entry that granted it
	Expires int64     `json:"expires,omitempty" msgpack:"expires,omitempty"` // hold_ttl end on the table clock
	Owner   string    `json:"owner,omitempty" msgpack:"owner,omitempty"`     // the session's token id ("" without ACLs)
	Value   string    `json:"value" msgpack:"value,omitempty"`               // what the holder says about itself (LockSpec.Value, Proclaim)
}

// Waiter is one queued constituent as seen from outside.
type Waiter struct {
	Session   SessionID `json:"session"`
	Key       string    `json:"key"` // the session's public id
	RequestID string    `json:"request_id"`
	Mode      Mode      `json:"mode"`
	Weight    int       `json:"weight"`
	Seq       uint64    `json:"seq"`
	Owner     string    `json:"owner,omitempty"` // the session's token id ("" without ACLs)
	Created   uint64    `json:"created"`         // index of the entry that queued the request
	Value     string    `json:"value,omitempty"` // the value the request gives the hold it waits for (a candidate's)
}

// LockInfo describes one name: its holders and its waiters in arrival order.
type LockInfo struct {
	Name         string   `json:"name"`
	Version      uint64   `json:"version"`
	Limit        int      `json:"limit"`
	Holders      []Holder `json:"holders"`
	Waiters      []Waiter `json:"waiters"`
	DelayedUntil int64    `json:"delayed_until,omitempty"`
}

// SessionInfo describes one session.
type SessionInfo struct {
	ID         SessionID     `json:"id"`
	Key        string        `json:"key"`   // public id
	Owner      string        `json:"owner"` // id of the ACL token that owns it; "" without ACLs
	Name       string        `json:"name"`
	TTL        time.Duration `json:"ttl"`
	OnDeadlock OnDeadlock    `json:"on_deadlock"`
	Ordered    bool          `json:"ordered"`
	LockDelay  time.Duration `json:"lock_delay"`
	Held       []HeldLock    `json:"held"`
	Pending    []string      `json:"pending"` // request ids in arrival order
	Revoked    []Revocation  `json:"revoked"` // latest holds an operator revoked, oldest first
}

// HeldLock is one of a session's holds.
type HeldLock struct {
	Name string `json:"name"`
	Holder
}

func (n *node) info() LockInfo {
	info := LockInfo{Name: n.name, Version: n.version, Limit: n.limit, DelayedUntil: n.delayUntil,
		Holders: make([]Holder, 0, len(n.holds)), Waiters: make([]Waiter, 0, n.queue().here.size)}
	for _, h := range n.holds {
		info.Holders = append(info.Holders, h.view())
	}
	for e := n.queue().here.head; e != nil; e = e.next {
		r := e.w.req
		info.Waiters = append(info.Waiters, Waiter{Session: r.s.id, Key: r.s.publicKey(), RequestID: r.id, Mode: e.w.mode,
			Weight: r.specs[e.w.spec].Weight, Seq: r.seq, Owner: r.s.owner, Created: r.created, Value: r.specs[e.w.spec].Value})
	}
	return info
}

func (h *hold) view() Holder {
	return Holder{Session: h.s.id, Key: h.s.publicKey(), Mode: h.mode, Weight: h.weight, Count: h.count, Token: h.token, Expires: h.expires,
		Owner: h.s.owner, Value: h.value}
}

// Leader returns the name's leader, the holder an election names (docs/api.md,
// "Leader election"): of its holders, the one with the smallest fencing
// token, which is the longest-standing grant among them. A name held
// exclusively has one holder, its leader; a name held shared (read, or
// a semaphore's permits) names the holder granted first. An upgrade
// takes a new token, and so may pass the leadership to an older holder.
// false when nobody holds the name.
func (li *LockInfo) Leader() (Holder, bool) {
	var leader *Holder
	for i := range li.Holders {
		if h := &li.Holders[i]; leader == nil || h.Token < leader.Token {
			leader = h
		}
	}
	if leader == nil {
		return Holder{}, false
	}
	return *leader, true
}

// Lock returns one name's state; false if nobody holds, waits for or
// delays it.
func (t *Table) Lock(name string) (LockInfo, bool) {
	n := t.nodes[name]
	if n == nil || (!n.inUse() && n.delayUntil == 0) {
		return LockInfo{}, false
	}
	return n.info(), true
}

// Version returns the version of a name's queue. For a name the table does
// not know it returns the index of the last entry that forgot any name: at
// least the name's last version, so a blocking query waiting for
// version > V wakes when the name is released and forgotten (like Consul's
// index for a missing key, at the cost of an occasional early wake).
func (t *Table) Version(name string) uint64 {
	if n := t.nodes[name]; n != nil {
		return n.version
	}
	return t.forgotten
}

// Locks returns every name in use under prefix (a name prefix, byte-wise),
// sorted by name.
func (t *Table) Locks(prefix string) []LockInfo {
	var names []string
	for name, n := range t.nodes {
		if strings.HasPrefix(name, prefix) && (n.inUse() || n.delayUntil != 0) {
			names = append(names, name)
		}
	}
	sortNames(names)
	out := make([]LockInfo, len(names))
	for i, name := range names {
		out[i] = t.nodes[name].info()
	}
	return out
}

func (s *session) info() SessionInfo {
	info := SessionInfo{ID: s.id, Key: s.publicKey(), Owner: s.owner, Name: s.name, TTL: s.ttl,
		OnDeadlock: s.onDeadlock, Ordered: s.ordered, LockDelay: s.lockDelay, Held: []HeldLock{},
		Pending: []string{}, Revoked: slices.Clone(s.revoked)}
	if info.Revoked == nil {
		info.Revoked = []Revocation{}
	}
	for _, h := range s.sortedHolds() {
		info.Held = append(info.Held, HeldLock{Name: h.n.name, Holder: h.view()})
	}
	for _, r := range s.pending {
		info.Pending = append(info.Pending, r.id)
	}
	return info
}

// Session returns one session.
func (t *Table) Session(id SessionID) (SessionInfo, bool) {
	s := t.sessions[id]
	if s == nil {
		return SessionInfo{}, false
	}
	return s.info(), true
}

// HasSession reports whether a session is open.
func (t *Table) HasSession(id SessionID) bool { return t.sessions[id] != nil }

// SessionTTLs returns every open session's TTL, by id. The leader re-arms
// its keepalive timers from it when it takes office.
func (t *Table) SessionTTLs() map[SessionID]time.Duration {
	m := make(map[SessionID]time.Duration, len(t.sessions))
	for id, s := range t.sessions {
		m[id] = s.ttl
	}
	return m
}

// Sessions returns every open session, by id.
func (t *Table) Sessions() []SessionInfo {
	ids := make([]SessionID, 0, len(t.sessions))
	for id := range t.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]SessionInfo, len(ids))
	for i, id := range ids {
		out[i] = t.sessions[id].info()
	}
	return out
}

// SessionsPage returns up to limit sessions whose keys sort after after
// and whose owner keep accepts, in key order, and the key to pass as after
// for the next page ("" when this is the last). limit <= 0 means no limit.
func (t *Table) SessionsPage(after string, limit int, keep func(owner string) bool) (page []SessionInfo, next string) {
	keys := make([]string, 0, len(t.sessions))
	byKey := make(map[string]*session, len(t.sessions))
	for _, s := range t.sessions {
		if k := s.publicKey(); k > after && keep(s.owner) {
			keys = append(keys, k)
			byKey[k] = s
		}
	}
	sortNames(keys)
	if limit > 0 && len(keys) > limit {
		keys, next = keys[:limit], keys[limit-1]
	}
	page = make([]SessionInfo, len(keys))
	for i, k := range keys {
		page[i] = byKey[k].info()
	}
	return page, next
}

// LocksPage is Locks(prefix) from the first name after after, only the
// names keep accepts, at most limit of them, and the name to pass as after
// for the next page ("" when this is the last). limit <= 0 means no limit.
func (t *Table) LocksPage(prefix, after string, limit int, keep func(name string) bool) (page []LockInfo, next string) {
	var names []string
	for name, n := range t.nodes {
		if name > after && strings.HasPrefix(name, prefix) && (n.inUse() || n.delayUntil != 0) && keep(name) {
			names = append(names, name)
		}
	}
	sortNames(names)
	if limit > 0 && len(names) > limit {
		names, next = names[:limit], names[limit-1]
	}
	page = make([]LockInfo, len(names))
	for i, name := range names {
		page[i] = t.nodes[name].info()
	}
	return page, next
}

// Request returns session's acquire request id, pending or recently
// finished. (FindRequest finds a request by id alone, for a token.)
func (t *Table) Request(session SessionID, id string) (RequestInfo, bool) {
	s := t.sessions[session]
	if s == nil {
		return RequestInfo{}, false
	}
	r := t.requests.of(s, id)
	if r == nil {
		return RequestInfo{}, false
	}
	return *t.requestInfo(r), true
}

// Check reports whether token is the token of a current hold on name or on
// one of its ancestors (a lock on "db" protects "db/x"), and returns the
// newest such token, 0 if there is none.
func (t *Table) Check(name string, token uint64) (valid bool, current uint64) {
	n := t.nodes[name]
	if n == nil {
		for p := parentName(name); p != "" && n == nil; p = parentName(p) {
			n = t.nodes[p]
		}
	}
	for ; n != nil; n = n.parent {
		for _, h := range n.holds {
			valid = valid || h.token == token
			current = max(current, h.token)
		}
	}
	return valid && token != 0, current
}

// Edge is one edge of the wait-for graph: From waits for To.
type Edge struct {
	From    SessionID `json:"from"`
	To      SessionID `json:"to"`
	FromKey string    `json:"from_key"` // public ids
	ToKey   string    `json:"to_key"`
}

// WaitGraph returns the wait-for graph, sorted.
func (t *Table) WaitGraph() []Edge {
	var out []Edge
	for _, s := range t.sessionsByID() {
		for _, v := range t.waitsFor(s) {
			out = append(out, Edge{From: s.id, To: v.id, FromKey: s.publicKey(), ToKey: v.publicKey()})
		}
	}
	return out
}

func (t *Table) sessionsByID() []*session {
	ss := make([]*session, 0, len(t.sessions))
	for _, s := range t.sessions {
		ss = append(ss, s)
	}
	slices.SortFunc(ss, func(a, b *session) int { return cmp.Compare(a.id, b.id) })
	return ss
}

// Stats counts what the table holds, for metrics.
type Stats struct {
	Sessions, Locks, Holds, Waiters, Requests int
}

// Stats returns the table's counts. It is O(names).
func (t *Table) Stats() Stats {
	st := Stats{Sessions: len(t.sessions), Requests: t.requests.n}
	for _, n := range t.nodes {
		if n.inUse() {
			st.Locks++
		}
		st.Holds += len(n.holds)
		st.Waiters += n.queue().here.size
	}
	return st
}
