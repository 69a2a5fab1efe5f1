package lockstate

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Token ids and hashes as the node draws them (a UUID's text, hex SHA-256).
func tokenID(n int) string   { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }
func tokenHash(n int) string { return fmt.Sprintf("%064x", n) }

const (
	admin = 1
	jobs  = 2 // write on jobs/
	other = 3 // write on other/, read on jobs/
)

// aclDriver is a driver whose table is bootstrapped with the tokens above.
func aclDriver(t *testing.T) *driver {
	d := newDriver(t)
	d.must(&BootstrapACL{ID: tokenID(admin), Hash: tokenHash(admin)})
	d.must(&CreateToken{Authority: Authority{Auth: tokenID(admin)}, ID: tokenID(jobs), Hash: tokenHash(jobs), Name: "jobs",
		Rules: []Rule{{Prefix: "jobs/", Access: AccessWrite}}})
	d.must(&CreateToken{Authority: Authority{Auth: tokenID(admin)}, ID: tokenID(other), Hash: tokenHash(other), Name: "other",
		Rules: []Rule{{Prefix: "other/", Access: AccessWrite}, {Prefix: "jobs/", Access: AccessRead}}})
	return d
}

func (d *driver) must(cmd Command) Result {
	d.t.Helper()
	res := d.apply(cmd)
	if res.Err != nil {
		d.t.Fatalf("%T: %v", cmd, res.Err)
	}
	return res
}

// refused applies cmd and checks it fails with code and changes nothing.
func (d *driver) refused(cmd Command, code Code) {
	d.t.Helper()
	before := d.tab.Digest()
	res := d.apply(cmd)
	if res.Err == nil || res.Err.Code != code {
		d.t.Fatalf("%T %+v: err %v, want %s", cmd, cmd, res.Err, code)
	}
	if d.tab.Digest() != before {
		d.t.Fatalf("%T refused with %s changed the table", cmd, code)
	}
}

func (d *driver) ownedSession(tok int) SessionID {
	d.t.Helper()
	return d.must(&CreateSession{TTL: 10 * time.Second, Authority: Authority{Auth: tokenID(tok)}}).Session
}

func TestACLBeforeBootstrapChecksNothing(t *testing.T) {
	d := newDriver(t)
	s := d.session()
	d.acquire(s, "anything", Write, 0)
	if d.tab.ACLBootstrapped() {
		t.Fatal("bootstrapped without BootstrapACL")
	}
	// A token that does not exist is refused even before bootstrap.
	d.refused(&Acquire{Session: s, Authority: Authority{Auth: tokenID(9)}, Locks: []LockSpec{{Name: "b", Mode: Write}}}, CodeUnauthorized)
}

func TestACLBootstrapOnce(t *testing.T) {
	d := aclDriver(t)
	d.refused(&BootstrapACL{ID: tokenID(7), Hash: tokenHash(7)}, CodeForbidden)
	if tok, ok := d.tab.TokenByHash(tokenHash(admin)); !ok || !tok.Admin() {
		t.Fatalf("bootstrap token = %+v, %v", tok, ok)
	}
	// Without a token nothing acts for a client any more.
	d.refused(&CreateSession{TTL: 10 * time.Second}, CodeUnauthorized)
	s := d.ownedSession(jobs)
	d.refused(&Acquire{Session: s, Locks: []LockSpec{{Name: "jobs/a", Mode: Write}}}, CodeUnauthorized)
	d.refused(&CloseSession{Session: s}, CodeUnauthorized)
	d.refused(&Revoke{Name: "jobs/a"}, CodeUnauthorized)
}

func TestACLPrefixRules(t *testing.T) {
	d := aclDriver(t)
	s := d.ownedSession(jobs)
	acq := func(names ...string) *Acquire {
		c := &Acquire{Session: s, Authority: Authority{Auth: tokenID(jobs)}}
		for _, n := range names {
			c.Locks = append(c.Locks, LockSpec{Name: n, Mode: Write})
		}
		return c
	}
	d.must(acq("jobs/a"))
	d.refused(acq("other/a"), CodeForbidden)
	d.refused(acq("jobs/b", "other/b"), CodeForbidden) // a multi-lock request needs write on every name
	d.refused(acq("jobs"), CodeForbidden)              // "jobs/" does not cover "jobs"
	d.refused(&CreateSession{TTL: 10 * time.Second, Authority: Authority{Auth: tokenID(9)}}, CodeUnauthorized)

	// Longest prefix wins: other may read jobs/ but not write it.
	so := d.ownedSession(other)
	d.refused(&Acquire{Session: so, Authority: Authority{Auth: tokenID(other)}, Locks: []LockSpec{{Name: "jobs/x", Mode: Write}}}, CodeForbidden)
	d.must(&Acquire{Session: so, Authority: Authority{Auth: tokenID(other)}, Locks: []LockSpec{{Name: "other/x", Mode: Write}}})
}

// TestACLSessionOwnership: a session belongs to the token that created it;
// another token cannot act through it, an admin can.
func TestACLSessionOwnership(t *testing.T) {
	d := aclDriver(t)
	s := d.ownedSession(jobs)
	d.must(&Acquire{Session: s, Authority: Authority{Auth: tokenID(jobs)}, RequestID: "held", Locks: []LockSpec{{Name: "jobs/a", Mode: Write}}})
	victim := d.ownedSession(jobs)
	d.must(&Acquire{Session: victim, Authority: Authority{Auth: tokenID(jobs)}, RequestID: "queued", Wait: time.Minute,
		Locks: []LockSpec{{Name: "jobs/a", Mode: Write}}})
	for _, cmd := range []Command{
		&Release{Session: s, Name: "jobs/a", Authority: Authority{Auth: tokenID(other)}},
		&Release{Session: s, RequestID: "held", Authority: Authority{Auth: tokenID(other)}},
		&Surrender{Session: s, Name: "jobs/a", Authority: Authority{Auth: tokenID(other)}},
		&CloseSession{Session: s, Authority: Authority{Auth: tokenID(other)}},
		&Acquire{Session: s, Authority: Authority{Auth: tokenID(other)}, Locks: []LockSpec{{Name: "other/a", Mode: Write}}},
	} {
		d.refused(cmd, CodeNoSession) // as if it did not exist
	}
	d.refused(&Cancel{RequestID: "queued", Authority: Authority{Auth: tokenID(other)}}, CodeNoRequest)
	if err := d.tab.MayUse(tokenID(other), s); err == nil || err.Code != CodeNoSession {
		t.Fatalf("MayUse by another token = %v", err)
	}
	if err := d.tab.MayUse(tokenID(admin), s); err != nil {
		t.Fatalf("MayUse by admin = %v", err)
	}
	d.must(&CloseSession{Session: s, Authority: Authority{Auth: tokenID(admin)}})
	if got := d.status("queued"); got != Granted {
		t.Fatalf("waiter after the admin closed the holder: %s", got)
	}
}

func TestACLDeletedTokenStopsAtOnce(t *testing.T) {
	d := aclDriver(t)
	s := d.ownedSession(jobs)
	d.must(&Acquire{Session: s, Authority: Authority{Auth: tokenID(jobs)}, Locks: []LockSpec{{Name: "jobs/a", Mode: Write}}})
	d.refused(&DeleteToken{ID: tokenID(jobs), Authority: Authority{Auth: tokenID(other)}}, CodeForbidden)
	d.must(&DeleteToken{ID: tokenID(jobs), Authority: Authority{Auth: tokenID(admin)}})
	d.refused(&Release{Session: s, Name: "jobs/a", Authority: Authority{Auth: tokenID(jobs)}}, CodeUnauthorized)
	d.refused(&DeleteToken{ID: tokenID(jobs), Authority: Authority{Auth: tokenID(admin)}}, CodeNoToken)
	if _, ok := d.tab.TokenByHash(tokenHash(jobs)); ok {
		t.Fatal("deleted token still resolves")
	}
	// Its session lives on until it expires or an admin closes it.
	d.must(&Release{Session: s, Name: "jobs/a", Authority: Authority{Auth: tokenID(admin)}})
}

func TestACLTokenValidation(t *testing.T) {
	d := aclDriver(t)
	good := CreateToken{Authority: Authority{Auth: tokenID(admin)}, ID: tokenID(20), Hash: tokenHash(20), Rules: []Rule{{Prefix: "a/", Access: AccessRead}}}
	for name, mutate := range map[string]func(c *CreateToken){
		"bad id":        func(c *CreateToken) { c.ID = "x" },
		"bad hash":      func(c *CreateToken) { c.Hash = strings.Repeat("z", 64) },
		"no rules":      func(c *CreateToken) { c.Rules = nil },
		"bad access":    func(c *CreateToken) { c.Rules = []Rule{{Prefix: "a", Access: "root"}} },
		"prefix twice":  func(c *CreateToken) { c.Rules = append(c.Rules, c.Rules[0]) },
		"control char":  func(c *CreateToken) { c.Rules = []Rule{{Prefix: "a\x00", Access: AccessRead}} },
		"reused id":     func(c *CreateToken) { c.ID = tokenID(jobs) },
		"reused secret": func(c *CreateToken) { c.Hash = tokenHash(jobs) },
	} {
		c := good
		c.Rules = append([]Rule(nil), good.Rules...)
		mutate(&c)
		d.refused(&c, CodeInvalid)
		_ = name
	}
	d.refused(&CreateToken{Authority: Authority{Auth: tokenID(jobs)}, ID: tokenID(21), Hash: tokenHash(21), Rules: good.Rules}, CodeForbidden)
	d.must(&good)
}

func TestRevoke(t *testing.T) {
	d := aclDriver(t)
	a, b, c := d.ownedSession(jobs), d.ownedSession(jobs), d.ownedSession(jobs)
	read := func(s SessionID, id string, wait time.Duration) *Acquire {
		return &Acquire{Session: s, Authority: Authority{Auth: tokenID(jobs)}, RequestID: id, Wait: wait, Locks: []LockSpec{{Name: "jobs/db", Mode: Read}}}
	}
	ta := d.must(read(a, "a", 0)).Request.Token
	tb := d.must(read(b, "b", 0)).Request.Token
	d.must(&Acquire{Session: c, Authority: Authority{Auth: tokenID(jobs)}, RequestID: "c", Wait: time.Minute, Locks: []LockSpec{{Name: "jobs/db", Mode: Write}}})
	d.refused(&Revoke{Name: "jobs/db", Authority: Authority{Auth: tokenID(jobs)}}, CodeForbidden)

	res := d.must(&Revoke{Name: "jobs/db", Authority: Authority{Auth: tokenID(admin)}})
	var revoked []string
	for _, ev := range res.Events {
		if ev.Kind == EvRevoked {
			revoked = append(revoked, fmt.Sprintf("%d:%d", ev.Session, ev.Token))
		}
	}
	if want := []string{fmt.Sprintf("%d:%d", a, ta), fmt.Sprintf("%d:%d", b, tb)}; fmt.Sprint(revoked) != fmt.Sprint(want) {
		t.Fatalf("revoked %v, want %v (grant order)", revoked, want)
	}
	for _, tok := range []uint64{ta, tb} {
		if valid, _ := d.tab.Check("jobs/db", tok); valid {
			t.Fatalf("token %d still valid after revoke", tok)
		}
	}
	if d.status("c") != Granted || d.status("a") != Released {
		t.Fatalf("after revoke: c %s, a %s", d.status("c"), d.status("a"))
	}
	info, _ := d.tab.Session(a)
	if len(info.Revoked) != 1 || info.Revoked[0] != (Revocation{Name: "jobs/db", Token: ta, Index: d.index}) {
		t.Fatalf("session a's revocations: %+v", info.Revoked)
	}
	// Nothing held: nothing to revoke, and no error.
	if res := d.must(&Revoke{Name: "jobs/none", Authority: Authority{Auth: tokenID(admin)}}); len(res.Events) != 0 {
		t.Fatalf("revoke of a free name: %+v", res.Events)
	}
}

func TestRevocationsKept(t *testing.T) {
	d := newDriver(t)
	s := d.session()
	for i := range RevocationsKept + 3 {
		name := fmt.Sprintf("n%d", i)
		d.acquire(s, name, Write, 0)
		d.must(&Revoke{Name: name})
	}
	info, _ := d.tab.Session(s)
	if len(info.Revoked) != RevocationsKept || info.Revoked[0].Name != "n3" {
		t.Fatalf("kept %d revocations from %q", len(info.Revoked), info.Revoked[0].Name)
	}
}

func TestLimits(t *testing.T) {
	d := newDriver(t)
	lim := &Limits{Sessions: 3, HoldsPerSession: 2, WaitersPerName: 1, Waiters: 2}
	acq := func(s SessionID, wait time.Duration, names ...string) *Acquire {
		c := &Acquire{Session: s, Wait: wait, Limits: lim}
		for _, n := range names {
			c.Locks = append(c.Locks, LockSpec{Name: n, Mode: Write})
		}
		return c
	}
	a := d.must(&CreateSession{TTL: 10 * time.Second, Limits: lim}).Session
	b := d.must(&CreateSession{TTL: 10 * time.Second, Limits: lim}).Session
	c := d.must(&CreateSession{TTL: 10 * time.Second, Limits: lim}).Session
	d.refused(&CreateSession{TTL: 10 * time.Second, Limits: lim}, CodeLimit)
	e := d.session() // an entry without limits has none

	d.must(acq(a, 0, "x", "y"))
	d.must(acq(a, 0, "x")) // reentrant: no new name
	d.refused(acq(a, 0, "z"), CodeLimit)

	d.must(acq(b, time.Minute, "x"))
	d.refused(acq(c, time.Minute, "x"), CodeLimit) // one waiter on x already
	d.must(acq(c, time.Minute, "y"))
	d.refused(acq(e, time.Minute, "x/sub"), CodeLimit) // two waiters in the table
	d.must(acq(e, time.Minute, "free"))                // granted at once: queues nothing
	d.must(&CloseSession{Session: b})
	d.must(acq(e, time.Minute, "x/sub")) // room again
}

func TestSessionKeys(t *testing.T) {
	d := newDriver(t)
	key := "k0123456789abcdefghijK"
	s := d.must(&CreateSession{TTL: 10 * time.Second, Key: key})
	if s.Key != key {
		t.Fatalf("result key %q", s.Key)
	}
	if id, ok := d.tab.SessionByKey(key); !ok || id != s.Session {
		t.Fatalf("SessionByKey = %d, %v", id, ok)
	}
	if _, ok := d.tab.SessionByKey(fmt.Sprint(s.Session)); ok {
		t.Fatal("a keyed session is found by its number")
	}
	old := d.session() // no key: an entry from before keys
	if id, ok := d.tab.SessionByKey(fmt.Sprint(old)); !ok || id != old {
		t.Fatal("an old session is not found by its number")
	}
	for _, bad := range []string{"short", strings.Repeat("1", 22), strings.Repeat("a", 65), "k0123456789abcdefghi/K"} {
		d.refused(&CreateSession{TTL: 10 * time.Second, Key: bad}, CodeInvalid)
	}
	d.refused(&CreateSession{TTL: 10 * time.Second, Key: key}, CodeInvalid) // drawn twice: a forged or replayed entry
	// Leaders no longer draw keys that start with "-", but logs hold some.
	d.must(&CreateSession{TTL: 10 * time.Second, Key: "-0123456789abcdefghijK"})
	d.must(&CloseSession{Session: s.Session})
	if _, ok := d.tab.SessionByKey(key); ok {
		t.Fatal("a closed session's key still resolves")
	}
}

// TestACLStateSurvivesExportAndLoad: tokens, keys, owners and revocations
// are part of the exported state: a loaded table digests the same and acts
// the same.
func TestACLStateSurvivesExportAndLoad(t *testing.T) {
	d := aclDriver(t)
	s := d.must(&CreateSession{TTL: 10 * time.Second, Authority: Authority{Auth: tokenID(jobs)}, Key: "k0123456789abcdefghijK"}).Session
	d.must(&Acquire{Session: s, Authority: Authority{Auth: tokenID(jobs)}, Locks: []LockSpec{{Name: "jobs/a", Mode: Write}}})
	d.must(&Revoke{Name: "jobs/a", Authority: Authority{Auth: tokenID(admin)}})
	loaded := reload(t, d.tab)
	if loaded.Digest() != d.tab.Digest() {
		t.Fatal("digest differs after export and load")
	}
	d.tab = loaded
	if id, ok := d.tab.SessionByKey("k0123456789abcdefghijK"); !ok || id != s {
		t.Fatal("key lost in export")
	}
	d.refused(&BootstrapACL{ID: tokenID(8), Hash: tokenHash(8)}, CodeForbidden)
	d.refused(&CloseSession{Session: s, Authority: Authority{Auth: tokenID(other)}}, CodeNoSession)
	if info, _ := d.tab.Session(s); len(info.Revoked) != 1 {
		t.Fatalf("revocations lost: %+v", info.Revoked)
	}
}

// reload exports tab and loads the records into a new table.
func reload(t *testing.T, tab *Table) *Table {
	t.Helper()
	out, err := roundTrip(tab)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
