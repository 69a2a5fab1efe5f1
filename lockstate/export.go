package lockstate

import (
	"cmp"
	"fmt"
	"slices"
)

// FormatVersion is the version of the record layout (records.go).
// NewLoader refuses other versions.
const FormatVersion = 1

// Record is one record of a table's export: a *Header or a pointer to one
// of the record types (records.go, denycert.go). Only this package's types
// are records: each kind says what Loader does with it and what it adds
// to the Digest, so a kind cannot be exported without both. Adding a kind
// means its type with those two methods, its place in Export, and a row in
// fsm's registry of snapshot records (docs/architecture.md, "Adding a
// snapshot record kind").
type Record interface {
	// load adds the record to the table being loaded. It must not keep
	// the record itself, only what it holds.
	load(l *Loader) error
	// digest writes the record's part of the Digest in its fixed layout.
	digest(d *digester)
}

// Export calls fn with the Header and then every record in a canonical
// order: sessions by id, nodes in tree order (each name before its
// children, siblings in creation order, which the same log always
// reproduces and Loader preserves), requests by arrival, then session
// extras by session id, the ACLRecord, tokens by id and the denied
// certificates by serial. Each record is new: fn may keep it.
func (t *Table) Export(fn func(rec Record) error) error {
	nodes := make([]*node, 0, len(t.nodes))
	var walk func(l siblings)
	walk = func(l siblings) {
		for n := l.first; n != nil; n = n.next {
			nodes = append(nodes, n)
			walk(n.children)
		}
	}
	walk(t.roots)
	reqs := t.requests.all()
	slices.SortFunc(reqs, func(a, b *request) int { return cmp.Compare(a.seq, b.seq) })
	sessions := t.sessionsByID()

	h := Header{Format: FormatVersion, Index: t.index, Clock: t.clock, Seq: t.seq, Forgotten: t.forgotten,
		Sessions: len(sessions), Nodes: len(nodes), Requests: len(reqs)}
	if err := fn(&h); err != nil {
		return err
	}
	for _, s := range sessions {
		rec := SessionRecord{ID: s.id, Name: s.name, TTL: s.ttl, OnDeadlock: s.onDeadlock,
			Ordered: s.ordered, LockDelay: s.lockDelay, Done: make([]string, 0, len(s.done))}
		for _, r := range s.done {
			if t.requests.has(r) {
				rec.Done = append(rec.Done, r.id)
			}
		}
		if err := fn(&rec); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		rec := NodeRecord{Name: n.name, Version: n.version, Limit: n.limit, DelayUntil: n.delayUntil,
			Holds: make([]HoldRecord, len(n.holds))}
		for i, h := range n.holds {
			rec.Holds[i] = HoldRecord{Session: h.s.id, Mode: h.mode, Weight: h.weight, Count: h.count,
				Token: h.token, Expires: h.expires, Granted: h.granted, Value: h.value}
		}
		if err := fn(&rec); err != nil {
			return err
		}
	}
	for _, r := range reqs {
		rec := RequestRecord{ID: r.id, Session: r.s.id, Seq: r.seq, Locks: r.specs, Require: r.require,
			Need: r.need, HoldTTL: r.holdTTL, Deadline: r.deadline, Restore: r.restore, Status: r.status,
			Token: r.token, Granted: r.granted, Created: r.created, Ended: r.ended}
		if r.status == Pending {
			rec.Upgrade = make([]bool, len(r.waiters))
			for i, w := range r.waiters {
				rec.Upgrade[i] = w.upgrade
			}
		}
		if err := fn(&rec); err != nil {
			return err
		}
	}
	if err := t.exportACL(sessions, fn); err != nil {
		return err
	}
	for _, d := range t.DeniedCerts() {
		if err := fn((*DeniedCertRecord)(&d)); err != nil {
			return err
		}
	}
	return nil
}

// exportACL calls fn with the session extras, the ACLRecord and the tokens.
func (t *Table) exportACL(sessions []*session, fn func(rec Record) error) error {
	for _, s := range sessions {
		if s.key == "" && s.owner == "" && len(s.revoked) == 0 {
			continue
		}
		if err := fn(&SessionExtraRecord{Session: s.id, Key: s.key, Owner: s.owner, Revoked: slices.Clone(s.revoked)}); err != nil {
			return err
		}
	}
	if t.acl.bootstrapped == 0 && len(t.acl.tokens) == 0 {
		return nil
	}
	if err := fn(&ACLRecord{Bootstrapped: t.acl.bootstrapped}); err != nil {
		return err
	}
	for _, ti := range t.Tokens() {
		tok := ti.tok
		if err := fn(&TokenRecord{ID: tok.id, Name: tok.name, Hash: tok.hash, Rules: slices.Clone(tok.rules), Created: tok.created,
			Limits: ti.Limits}); err != nil {
			return err
		}
	}
	return nil
}

// Loader rebuilds a table from exported records, given to Load in
// Export's order, the Header first (or to NewLoader); Table returns the
// result. The zero Loader is ready to use.
type Loader struct {
	t      *Table
	h      Header
	counts [3]int // sessions, nodes and requests loaded, for the header's counts
	done   map[SessionID][]string
}

// NewLoader starts a load from a Header.
func NewLoader(h Header) (*Loader, error) {
	l := new(Loader)
	if err := h.load(l); err != nil {
		return nil, err
	}
	return l, nil
}

// Load adds rec, the next record in Export's order. It does not keep rec,
// only what rec holds, so a caller may reuse rec for the next record
// (though not the slices a kind's load keeps: see the kinds).
func (l *Loader) Load(rec Record) error {
	if _, ok := rec.(*Header); !ok && l.t == nil {
		return fmt.Errorf("lockstate: load: a %T before the header", rec)
	}
	return rec.load(l)
}

// Table finishes the load and returns the table.
func (l *Loader) Table() (*Table, error) {
	t := l.t
	if t == nil {
		return nil, fmt.Errorf("lockstate: load: no header")
	}
	if l.counts != [3]int{l.h.Sessions, l.h.Nodes, l.h.Requests} {
		return nil, fmt.Errorf("lockstate: load: got %v records, header says %d/%d/%d",
			l.counts, l.h.Sessions, l.h.Nodes, l.h.Requests)
	}
	for id, ids := range l.done { // each session's own ring: order within it is kept
		s := t.sessions[id]
		for _, rid := range ids {
			r := t.requests.of(s, rid)
			if r == nil || r.status == Pending {
				return nil, fmt.Errorf("lockstate: load: session %d remembers unknown request %q", id, rid)
			}
			s.done = append(s.done, r)
		}
	}
	if len(t.nodes) != l.counts[1] {
		return nil, fmt.Errorf("lockstate: load: %d nodes for %d node records", len(t.nodes), l.counts[1])
	}
	// Loading adds holds and waiters, which marks them for the searches of
	// an entry in progress; a loaded table has no cycles to search for.
	t.touched, t.suspects, t.justQueued = nil, nil, nil
	t.trimDeadlines()
	t.recountOwners()
	return t, nil
}
