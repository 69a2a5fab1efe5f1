package lockstate

import (
	"fmt"
	"time"

	"github.com/lockd/lockd/quorum"
)

// The kinds of Record, each with what Loader does with it (load) and its
// part of the Digest (digest). The msgpack tags are the fields' names in
// snapshots forever: fsm's snapshot codecs are generated from them.

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

// load starts the table (NewLoader): a loader takes one header, first.
func (h *Header) load(l *Loader) error {
	if l.t != nil {
		return fmt.Errorf("lockstate: load: a second header")
	}
	if h.Format != FormatVersion {
		return fmt.Errorf("lockstate: snapshot format %d, this build reads %d", h.Format, FormatVersion)
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
	l.t, l.h, l.done = t, *h, make(map[SessionID][]string)
	return nil
}

func (h *Header) digest(d *digester) { // not the index: content only
	d.putTag('H')
	d.putInt(int64(h.Format))
	d.putInt(h.Clock)
	d.putUint(h.Seq)
	d.putUint(h.Forgotten)
	d.putInt(int64(h.Sessions))
	d.putInt(int64(h.Nodes))
	d.putInt(int64(h.Requests))
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

func (rec *SessionRecord) load(l *Loader) error {
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

func (rec *SessionRecord) digest(d *digester) {
	d.putTag('S')
	d.putUint(uint64(rec.ID))
	d.putString(rec.Name)
	d.putInt(int64(rec.TTL))
	d.putString(string(rec.OnDeadlock))
	d.putBool(rec.Ordered)
	d.putInt(int64(rec.LockDelay))
	d.putUint(uint64(len(rec.Done)))
	for _, id := range rec.Done {
		d.putString(id)
	}
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
	// Value is the hold's value (snapshot format 7); written only when
	// there is one.
	Value string `msgpack:"value,omitempty"`
}

// load adds the node; its sessions must already be loaded. It copies the
// holds out of rec, so a caller may reuse rec.Holds's array.
func (rec *NodeRecord) load(l *Loader) error {
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
		if s == nil || s.holds[n] != nil || hr.Count < 1 || (hr.Mode != Read && hr.Mode != Write) || valueProblem(hr.Value) != "" {
			return fmt.Errorf("lockstate: load: bad hold on %q by session %d", rec.Name, hr.Session)
		}
		h := &hold{s: s, n: n, mode: hr.Mode, weight: hr.Weight, count: hr.Count, token: hr.Token,
			expires: hr.Expires, granted: hr.Granted, value: hr.Value}
		t.addHold(h)
		if h.expires != 0 {
			t.addDeadline(&deadline{at: h.expires, kind: dlHold, name: n.name, sess: s.id, h: h})
		}
	}
	l.counts[1]++
	return nil
}

func (rec *NodeRecord) digest(d *digester) {
	d.putTag('N')
	d.putString(rec.Name)
	d.putUint(rec.Version)
	d.putInt(int64(rec.Limit))
	d.putInt(rec.DelayUntil)
	d.putUint(uint64(len(rec.Holds)))
	for _, h := range rec.Holds {
		d.putUint(uint64(h.Session))
		d.putUint(uint64(h.Mode))
		d.putInt(int64(h.Weight))
		d.putInt(int64(h.Count))
		d.putUint(h.Token)
		d.putInt(h.Expires)
		d.putUint(h.Granted)
		d.putValue(h.Value)
	}
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

// load adds the request, which keeps rec's Locks and Granted; records
// must come in arrival order. Two sessions may have a request with the
// same id (SharesRequestIDs), one session not.
func (rec *RequestRecord) load(l *Loader) error {
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
			if p := valueProblem(sp.Value); p != "" { // a grant would give it to a hold
				return fmt.Errorf("lockstate: load: request %q: value of %q %s", rec.ID, sp.Name, p)
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

func (rec *RequestRecord) digest(d *digester) {
	d.putTag('R')
	d.putString(rec.ID)
	d.putUint(uint64(rec.Session))
	d.putUint(rec.Seq)
	d.putUint(uint64(len(rec.Locks)))
	for _, l := range rec.Locks {
		d.putSpec(l)
	}
	d.putString(string(rec.Require))
	d.putInt(int64(rec.Need))
	d.putInt(int64(rec.HoldTTL))
	d.putInt(rec.Deadline)
	d.putInt(int64(rec.Restore))
	d.putString(string(rec.Status))
	d.putUint(rec.Token)
	d.putUint(uint64(len(rec.Granted)))
	for _, g := range rec.Granted {
		d.putSpec(LockSpec{Name: g.Name, Mode: g.Mode, Weight: g.Weight})
		d.putUint(g.Token)
	}
	d.putUint(rec.Created)
	d.putUint(rec.Ended)
	d.putUint(uint64(len(rec.Upgrade)))
	for _, u := range rec.Upgrade {
		d.putBool(u)
	}
}

// The kinds ACLs and revocation brought (snapshot format 3). Export writes
// them only for a table that has any, so a table without keys, owners,
// revocations or tokens exports (and digests) exactly as before they
// existed.

// SessionExtraRecord is what a session has beyond its SessionRecord since
// ACLs and revocation. Export writes one only for a session that has any
// of it.
type SessionExtraRecord struct {
	Session SessionID    `msgpack:"session"`
	Key     string       `msgpack:"key"`
	Owner   string       `msgpack:"owner"`
	Revoked []Revocation `msgpack:"revoked"`
}

// load adds a session's extras; its session must be loaded.
func (rec *SessionExtraRecord) load(l *Loader) error {
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

func (rec *SessionExtraRecord) digest(d *digester) {
	d.putTag('X')
	d.putUint(uint64(rec.Session))
	d.putString(rec.Key)
	d.putString(rec.Owner)
	d.putUint(uint64(len(rec.Revoked)))
	for _, rv := range rec.Revoked {
		d.putString(rv.Name)
		d.putUint(rv.Token)
		d.putUint(rv.Index)
	}
}

// ACLRecord is the table's ACL state; written only once bootstrapped.
type ACLRecord struct {
	Bootstrapped uint64 `msgpack:"bootstrapped"` // index of the BootstrapACL entry
}

func (rec *ACLRecord) load(l *Loader) error {
	l.t.acl.bootstrapped = rec.Bootstrapped
	return nil
}

func (rec *ACLRecord) digest(d *digester) {
	d.putTag('A')
	d.putUint(rec.Bootstrapped)
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

func (rec *TokenRecord) load(l *Loader) error {
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

func (rec *TokenRecord) digest(d *digester) {
	d.putTag('T')
	d.putString(rec.ID)
	d.putString(rec.Name)
	d.putString(rec.Hash)
	d.putUint(uint64(len(rec.Rules)))
	for _, rule := range rec.Rules {
		d.putString(rule.Prefix)
		d.putString(string(rule.Access))
	}
	d.putUint(rec.Created)
	if rec.Limits != nil { // only then: older tables keep their digests
		d.putTag('L')
		d.putInt(int64(rec.Limits.Sessions))
		d.putInt(int64(rec.Limits.Waiters))
	}
}
