package lockstate

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/lockd/lockd/quorum"
)

// FormatVersion is the version of the record layout below. Load refuses
// other versions.
const FormatVersion = 1

// Header starts an export: the table's scalars and how many records follow.
type Header struct {
	Format    int    `msgpack:"format"`
	Index     uint64 `msgpack:"index"`
	Clock     int64  `msgpack:"clock"`
	Seq       uint64 `msgpack:"seq"`
	Forgotten uint64 `msgpack:"forgotten"`
	Sessions  int    `msgpack:"sessions"`
	Nodes     int    `msgpack:"nodes"`
	Requests  int    `msgpack:"requests"`
}

// SessionRecord is one session. Done lists its remembered finished
// requests, oldest first.
type SessionRecord struct {
	ID         SessionID     `msgpack:"id"`
	Name       string        `msgpack:"name"`
	TTL        time.Duration `msgpack:"ttl"`
	OnDeadlock OnDeadlock    `msgpack:"on_deadlock"`
	Ordered    bool          `msgpack:"ordered"`
	LockDelay  time.Duration `msgpack:"lock_delay"`
	Done       []string      `msgpack:"done"`
}

// NodeRecord is one name with its holds in grant order.
type NodeRecord struct {
	Name       string       `msgpack:"name"`
	Version    uint64       `msgpack:"version"`
	Limit      int          `msgpack:"limit"`
	DelayUntil int64        `msgpack:"delay_until"`
	Holds      []HoldRecord `msgpack:"holds"`
}

// HoldRecord is one hold.
type HoldRecord struct {
	Session SessionID `msgpack:"session"`
	Mode    Mode      `msgpack:"mode"`
	Weight  int       `msgpack:"weight"`
	Count   int       `msgpack:"count"`
	Token   uint64    `msgpack:"token"`
	Expires int64     `msgpack:"expires"`
	Granted uint64    `msgpack:"granted"`
}

// RequestRecord is one pending or remembered request. Upgrade is set for
// a pending request: which of its waiters were upgrades when queued.
type RequestRecord struct {
	ID       string             `msgpack:"id"`
	Session  SessionID          `msgpack:"session"`
	Seq      uint64             `msgpack:"seq"`
	Locks    []LockSpec         `msgpack:"locks"`
	Require  quorum.Requirement `msgpack:"require"`
	Need     int                `msgpack:"need"`
	HoldTTL  time.Duration      `msgpack:"hold_ttl"`
	Deadline int64              `msgpack:"deadline"`
	Restore  int                `msgpack:"restore"`
	Status   Status             `msgpack:"status"`
	Token    uint64             `msgpack:"token"`
	Granted  []Grant            `msgpack:"granted"`
	Created  uint64             `msgpack:"created"`
	Ended    uint64             `msgpack:"ended"`
	Upgrade  []bool             `msgpack:"upgrade"`
}

// SessionExtraRecord is what a session has beyond its SessionRecord since
// ACLs and revocation. Export writes one only for a session that has any
// of it, so a table without keys, owners or revocations exports (and
// digests) exactly as before they existed.
type SessionExtraRecord struct {
	Session SessionID    `msgpack:"session"`
	Key     string       `msgpack:"key"`
	Owner   string       `msgpack:"owner"`
	Revoked []Revocation `msgpack:"revoked"`
}

// ACLRecord is the table's ACL state; written only once bootstrapped.
type ACLRecord struct {
	Bootstrapped uint64 `msgpack:"bootstrapped"` // index of the BootstrapACL entry
}

// TokenRecord is one ACL token: the hash of its secret, never the secret.
type TokenRecord struct {
	ID      string `msgpack:"id"`
	Name    string `msgpack:"name"`
	Hash    string `msgpack:"hash"`
	Rules   []Rule `msgpack:"rules"`
	Created uint64 `msgpack:"created"`
	// Limits are the token's own per-token limits (snapshot format 4).
	Limits *TokenLimits `msgpack:"limits,omitempty"`
}

// Export calls fn with the Header and then every record in a canonical
// order: sessions by id, nodes in tree order (each name before its
// children, siblings in creation order, which the same log always
// reproduces and Loader preserves), requests by arrival, then session
// extras by session id, the ACLRecord, tokens by id and the denied
// certificates by serial.
func (t *Table) Export(fn func(rec any) error) error {
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
	if err := fn(h); err != nil {
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
		if err := fn(rec); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		rec := NodeRecord{Name: n.name, Version: n.version, Limit: n.limit, DelayUntil: n.delayUntil,
			Holds: make([]HoldRecord, len(n.holds))}
		for i, h := range n.holds {
			rec.Holds[i] = HoldRecord{Session: h.s.id, Mode: h.mode, Weight: h.weight, Count: h.count,
				Token: h.token, Expires: h.expires, Granted: h.granted}
		}
		if err := fn(rec); err != nil {
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
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := t.exportACL(sessions, fn); err != nil {
		return err
	}
	for _, d := range t.DeniedCerts() {
		if err := fn(DeniedCertRecord(d)); err != nil {
			return err
		}
	}
	return nil
}

// exportACL calls fn with the session extras, the ACLRecord and the tokens.
func (t *Table) exportACL(sessions []*session, fn func(rec any) error) error {
	for _, s := range sessions {
		if s.key == "" && s.owner == "" && len(s.revoked) == 0 {
			continue
		}
		if err := fn(SessionExtraRecord{Session: s.id, Key: s.key, Owner: s.owner, Revoked: slices.Clone(s.revoked)}); err != nil {
			return err
		}
	}
	if t.acl.bootstrapped == 0 && len(t.acl.tokens) == 0 {
		return nil
	}
	if err := fn(ACLRecord{Bootstrapped: t.acl.bootstrapped}); err != nil {
		return err
	}
	for _, ti := range t.Tokens() {
		tok := ti.tok
		if err := fn(TokenRecord{ID: tok.id, Name: tok.name, Hash: tok.hash, Rules: slices.Clone(tok.rules), Created: tok.created,
			Limits: ti.Limits}); err != nil {
			return err
		}
	}
	return nil
}

// Loader rebuilds a table from exported records, given in Export's order.
type Loader struct {
	t      *Table
	h      Header
	counts [3]int
	done   map[SessionID][]string
}

// NewLoader starts a load from a Header.
func NewLoader(h Header) (*Loader, error) {
	if h.Format != FormatVersion {
		return nil, fmt.Errorf("lockstate: snapshot format %d, this build reads %d", h.Format, FormatVersion)
	}
	// The counts only size the maps, and are capped: a header is input and
	// may lie (a stream claiming 2^32 names must not allocate for them).
	hint := func(n int) int { return max(0, min(n, 1<<20)) }
	t := &Table{
		byKey:    make(map[string]*session),
		sessions: make(map[SessionID]*session, hint(h.Sessions)),
		nodes:    make(map[string]*node, hint(h.Nodes)),
		requests: newRequestIndex(hint(h.Requests)),
	}
	t.index, t.clock, t.seq, t.forgotten = h.Index, h.Clock, h.Seq, h.Forgotten
	return &Loader{t: t, h: h, done: make(map[SessionID][]string)}, nil
}

// Session adds a session record.
func (l *Loader) Session(rec SessionRecord) error {
	t := l.t
	if t.sessions[rec.ID] != nil {
		return fmt.Errorf("lockstate: load: session %d twice", rec.ID)
	}
	t.sessions[rec.ID] = &session{id: rec.ID, name: rec.Name, ttl: rec.TTL, onDeadlock: rec.OnDeadlock,
		ordered: rec.Ordered, lockDelay: rec.LockDelay, holds: make(map[*node]*hold)}
	l.done[rec.ID] = rec.Done
	l.counts[0]++
	return nil
}

// Node adds a node record; its sessions must already be loaded.
func (l *Loader) Node(rec NodeRecord) error {
	t := l.t
	if err := ValidName(rec.Name); err != nil {
		return fmt.Errorf("lockstate: load: %w", err)
	}
	// Records come in tree order: the parent is there already, and a node
	// that exists already is a duplicate or out of order.
	var parent *node
	if p := parentName(rec.Name); p != "" {
		if parent = t.nodes[p]; parent == nil {
			return fmt.Errorf("lockstate: load: node %q before its parent", rec.Name)
		}
	}
	if t.nodes[rec.Name] != nil {
		return fmt.Errorf("lockstate: load: node %q twice", rec.Name)
	}
	n := &node{name: rec.Name, parent: parent}
	t.nodes[rec.Name] = n
	if parent != nil {
		parent.children.add(n)
	} else {
		t.roots.add(n)
	}
	if rec.DelayUntil != 0 {
		t.setDelay(n, rec.DelayUntil)
	}
	n.version, n.limit = max(rec.Version, 1), rec.Limit
	for _, hr := range rec.Holds {
		s := t.sessions[hr.Session]
		if s == nil || s.holds[n] != nil || hr.Count < 1 || (hr.Mode != Read && hr.Mode != Write) {
			return fmt.Errorf("lockstate: load: bad hold on %q by session %d", rec.Name, hr.Session)
		}
		h := &hold{s: s, n: n, mode: hr.Mode, weight: hr.Weight, count: hr.Count, token: hr.Token,
			expires: hr.Expires, granted: hr.Granted}
		t.addHold(h)
		if h.expires != 0 {
			t.addDeadline(&deadline{at: h.expires, kind: dlHold, name: n.name, sess: s.id, h: h})
		}
	}
	l.counts[1]++
	return nil
}

// Request adds a request record; records must come in arrival order. Two
// sessions may have a request with the same id (SharesRequestIDs), one
// session not.
func (l *Loader) Request(rec RequestRecord) error {
	t := l.t
	s := t.sessions[rec.Session]
	if s == nil || t.requests.of(s, rec.ID) != nil || len(rec.Locks) == 0 {
		return fmt.Errorf("lockstate: load: bad request %q", rec.ID)
	}
	r := &request{id: rec.ID, s: s, seq: rec.Seq, specs: rec.Locks, require: rec.Require, need: rec.Need,
		holdTTL: rec.HoldTTL, deadline: rec.Deadline, restore: rec.Restore, status: rec.Status,
		token: rec.Token, granted: rec.Granted, created: rec.Created, ended: rec.Ended}
	t.requests.add(r)
	if r.status == Pending {
		if len(rec.Upgrade) != len(rec.Locks) {
			return fmt.Errorf("lockstate: load: pending request %q without upgrade flags", rec.ID)
		}
		for _, sp := range rec.Locks {
			if err := ValidName(sp.Name); err != nil {
				return fmt.Errorf("lockstate: load: %w", err)
			}
		}
		t.enqueueAs(r, rec.Upgrade, false)
		if r.deadline != 0 {
			t.addDeadline(&deadline{at: r.deadline, kind: dlWait, seq: r.seq, r: r})
		}
	}
	l.counts[2]++
	return nil
}

// SessionExtra adds a session's extras; its session must be loaded.
func (l *Loader) SessionExtra(rec SessionExtraRecord) error {
	t := l.t
	s := t.sessions[rec.Session]
	if s == nil || s.key != "" || s.owner != "" || s.revoked != nil {
		return fmt.Errorf("lockstate: load: extras for session %d, unknown or twice", rec.Session)
	}
	if err := ValidKey(rec.Key); err != nil || t.byKey[rec.Key] != nil {
		return fmt.Errorf("lockstate: load: session %d: bad or repeated key", rec.Session)
	}
	if err := validAuth(rec.Owner); err != nil || len(rec.Revoked) > RevocationsKept {
		return fmt.Errorf("lockstate: load: session %d: bad owner or revocations", rec.Session)
	}
	s.key, s.owner, s.revoked = rec.Key, rec.Owner, rec.Revoked
	if s.key != "" {
		t.byKey[s.key] = s
	}
	return nil
}

// ACL adds the table's ACL state.
func (l *Loader) ACL(rec ACLRecord) error {
	l.t.acl.bootstrapped = rec.Bootstrapped
	return nil
}

// Token adds a token.
func (l *Loader) Token(rec TokenRecord) error {
	t := l.t
	if validTokenID("id", rec.ID) != nil || validHash(rec.Hash) != nil || ValidRules(rec.Rules) != nil || rec.Limits.validate() != nil {
		return fmt.Errorf("lockstate: load: bad token %q", rec.ID)
	}
	if t.newToken(rec.ID, rec.Hash) != nil {
		return fmt.Errorf("lockstate: load: token %q twice", rec.ID)
	}
	t.acl.add(&token{id: rec.ID, name: rec.Name, hash: rec.Hash, rules: rec.Rules, created: rec.Created, limits: rec.Limits})
	return nil
}

// Table finishes the load and returns the table.
func (l *Loader) Table() (*Table, error) {
	t := l.t
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
