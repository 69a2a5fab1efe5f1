package lockstate

import (
	"strings"
	"testing"
	"time"
)

// holdValue returns the value of s's hold on name, and whether s holds it.
func (d *driver) holdValue(s SessionID, name string) (string, bool) {
	li, _ := d.tab.Lock(name)
	for _, h := range li.Holders {
		if h.Session == s {
			return h.Value, true
		}
	}
	return "", false
}

// A hold takes its value from the grant that made it; a later grant to the
// same session (reentrant or an upgrade) replaces it only with a value of
// its own; a surrendered hold gets its value back when it is granted again.
func TestHoldValues(t *testing.T) {
	spec := func(name string, m Mode, value string) []LockSpec {
		return []LockSpec{{Name: name, Mode: m, Value: value}}
	}
	for _, tc := range []struct {
		name  string
		steps [][]LockSpec // acquired in turn by one session
		want  string
	}{
		{"a new hold takes the value", [][]LockSpec{spec("e", Write, "a:1")}, "a:1"},
		{"no value", [][]LockSpec{spec("e", Write, "")}, ""},
		{"reentrant without a value keeps it", [][]LockSpec{spec("e", Write, "a:1"), spec("e", Write, "")}, "a:1"},
		{"reentrant with a value replaces it", [][]LockSpec{spec("e", Write, "a:1"), spec("e", Write, "a:2")}, "a:2"},
		{"an upgrade keeps it", [][]LockSpec{spec("e", Read, "a:1"), spec("e", Write, "")}, "a:1"},
		{"an upgrade with a value replaces it", [][]LockSpec{spec("e", Read, "a:1"), spec("e", Write, "a:2")}, "a:2"},
		{"a read over it keeps it", [][]LockSpec{spec("e", Write, "a:1"), spec("e", Read, "")}, "a:1"},
		{"the largest value", [][]LockSpec{spec("e", Write, strings.Repeat("x", MaxValueLen))}, strings.Repeat("x", MaxValueLen)},
		{"text of any script", [][]LockSpec{spec("e", Write, "ünï\ncode ✓")}, "ünï\ncode ✓"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			s := d.session()
			for i, locks := range tc.steps {
				if r := d.must(&Acquire{Session: s, Locks: locks}).Request; r.Status != Granted {
					t.Fatalf("step %d: %s", i, r.Status)
				}
			}
			if got, held := d.holdValue(s, "e"); !held || got != tc.want {
				t.Fatalf("value %.20q (held %v), want %.20q", got, held, tc.want)
			}
			info, _ := d.tab.Session(s)
			if len(info.Held) != 1 || info.Held[0].Value != tc.want {
				t.Fatalf("the session's view: %+v", info.Held)
			}
		})
	}
}

func TestHoldValueRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
	}{
		{"one byte too long", strings.Repeat("x", MaxValueLen+1)},
		{"5 KiB", strings.Repeat("x", 5<<10)},
		{"not UTF-8", "10.0.0.1\xff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			s := d.session()
			d.acquire(s, "e", Write, 0)
			d.refused(&Acquire{Session: s, Locks: []LockSpec{{Name: "f", Mode: Write, Value: tc.value}}}, CodeInvalid)
			d.refused(&Acquire{Session: s, Locks: []LockSpec{{Name: "e", Mode: Write, Value: tc.value}}}, CodeInvalid)
			d.refused(&Proclaim{Session: s, Name: "e", Value: tc.value}, CodeInvalid)
			if err := (&Proclaim{Session: s, Name: "e", Value: tc.value}).Validate(); err == nil || !strings.HasPrefix(err.Message, "value ") {
				t.Fatalf("Validate: %v, want a message about the value", err)
			}
		})
	}
}

// A surrendered hold, granted again after the waiters it let in, has its
// value back; so has a deadlock victim's that surrendered.
func TestSurrenderKeepsValue(t *testing.T) {
	d := newDriver(t)
	s1, s2 := d.session(), d.session()
	d.must(&Acquire{Session: s1, Locks: []LockSpec{{Name: "e", Mode: Write, Value: "one"}}})
	r2 := d.must(&Acquire{Session: s2, Locks: []LockSpec{{Name: "e", Mode: Write, Value: "two"}}, Wait: time.Minute}).Request
	d.must(&Surrender{Session: s1, Name: "e"})
	if got, _ := d.holdValue(s2, "e"); got != "two" || d.status(r2.ID) != Granted {
		t.Fatalf("after the surrender: s2 has %q (%s)", got, d.status(r2.ID))
	}
	d.release(s2, "e")
	if got, held := d.holdValue(s1, "e"); !held || got != "one" {
		t.Fatalf("the surrendered hold, granted again: %q (held %v), want \"one\"", got, held)
	}
}

// Proclaim replaces the value of a hold the session has now, keeping its
// token; the name's version moves only when the value changes.
func TestProclaim(t *testing.T) {
	type setup struct {
		d          *driver
		s, s2      SessionID
		token      uint64
		versionWas uint64
	}
	start := func(t *testing.T) *setup {
		d := newDriver(t)
		st := &setup{d: d, s: d.session(), s2: d.session()}
		st.token = d.must(&Acquire{Session: st.s, Locks: []LockSpec{{Name: "svc/e", Mode: Write, Value: "old"}}}).Request.Token
		st.versionWas = d.tab.Version("svc/e")
		return st
	}
	for _, tc := range []struct {
		name    string
		before  func(st *setup)
		cmd     func(st *setup) *Proclaim
		code    Code
		changed bool // the value moved (a version and an event)
		want    string
	}{
		{name: "the holder", cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s, Name: "svc/e", Value: "new"} },
			changed: true, want: "new"},
		{name: "with the hold's token", cmd: func(st *setup) *Proclaim {
			return &Proclaim{Session: st.s, Name: "svc/e", Value: "new", Token: st.token}
		}, changed: true, want: "new"},
		{name: "clears it", cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s, Name: "svc/e"} },
			changed: true, want: ""},
		{name: "the same value changes nothing", cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s, Name: "svc/e", Value: "old"} },
			want: "old"},
		{name: "another token", cmd: func(st *setup) *Proclaim {
			return &Proclaim{Session: st.s, Name: "svc/e", Value: "new", Token: st.token + 1}
		}, code: CodeNotHeld},
		{name: "a session that does not hold it", cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s2, Name: "svc/e", Value: "new"} },
			code: CodeNotHeld},
		{name: "a name nobody holds", cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s, Name: "svc/f", Value: "new"} },
			code: CodeNotHeld},
		{name: "an ancestor of the held name", cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s, Name: "svc", Value: "new"} },
			code: CodeNotHeld},
		{name: "no such session", cmd: func(st *setup) *Proclaim { return &Proclaim{Session: 4242, Name: "svc/e", Value: "new"} },
			code: CodeNoSession},
		{name: "after a release", before: func(st *setup) { st.d.release(st.s, "svc/e") },
			cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s, Name: "svc/e", Value: "new"} }, code: CodeNotHeld},
		{name: "after a revoke", before: func(st *setup) { st.d.must(&Revoke{Name: "svc/e"}) },
			cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s, Name: "svc/e", Value: "new"} }, code: CodeNotHeld},
		{name: "after the session closed", before: func(st *setup) { st.d.must(&CloseSession{Session: st.s}) },
			cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s, Name: "svc/e", Value: "new"} }, code: CodeNoSession},
		{name: "after the hold was lost and won again", before: func(st *setup) {
			st.d.release(st.s, "svc/e")
			st.d.acquire(st.s, "svc/e", Write, 0)
		}, cmd: func(st *setup) *Proclaim {
			return &Proclaim{Session: st.s, Name: "svc/e", Value: "new", Token: st.token}
		}, code: CodeNotHeld},
		{name: "no session", cmd: func(st *setup) *Proclaim { return &Proclaim{Name: "svc/e", Value: "new"} }, code: CodeInvalid},
		{name: "a bad name", cmd: func(st *setup) *Proclaim { return &Proclaim{Session: st.s, Name: "svc//e", Value: "new"} }, code: CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := start(t)
			if tc.before != nil {
				tc.before(st)
			}
			d, cmd := st.d, tc.cmd(st)
			if tc.code != "" {
				d.refused(cmd, tc.code) // and the table is as it was: a lost hold stays lost
				return
			}
			versionBefore := d.tab.Version("svc/e")
			res := d.must(cmd)
			p := res.Proclaimed
			if p == nil || p.Name != "svc/e" || p.Token != st.token || p.Value != tc.want || p.Version != d.tab.Version("svc/e") {
				t.Fatalf("result %+v, want token %d value %q version %d", p, st.token, tc.want, d.tab.Version("svc/e"))
			}
			if got, held := d.holdValue(st.s, "svc/e"); !held || got != tc.want {
				t.Fatalf("hold value %q (held %v), want %q", got, held, tc.want)
			}
			if ok, cur := d.tab.Check("svc/e", st.token); !ok || cur != st.token {
				t.Fatalf("Check after proclaim: %v %d, want the same token %d valid", ok, cur, st.token)
			}
			wantEvents := []Event(nil)
			wantVersion := versionBefore
			if tc.changed {
				wantEvents = []Event{{Kind: EvProclaimed, Session: st.s, Name: "svc/e", Token: st.token}}
				wantVersion = d.index
			}
			if d.tab.Version("svc/e") != wantVersion {
				t.Fatalf("version %d, want %d", d.tab.Version("svc/e"), wantVersion)
			}
			if len(res.Events) != len(wantEvents) || len(wantEvents) == 1 && res.Events[0] != wantEvents[0] {
				t.Fatalf("events %+v, want %+v", res.Events, wantEvents)
			}
		})
	}
}

// A proclaim acts for a token as a release does: write on the name, the
// session its own (another token's is as if it did not exist).
func TestProclaimACL(t *testing.T) {
	d := aclDriver(t)
	auth := func(tok int) Authority { return Authority{Auth: tokenID(tok)} }
	s := d.ownedSession(jobs)
	d.must(&Acquire{Session: s, Authority: auth(jobs), Locks: []LockSpec{{Name: "jobs/e", Mode: Write, Value: "a"}}})
	d.refused(&Proclaim{Session: s, Name: "jobs/e", Value: "b", Authority: auth(other)}, CodeNoSession)
	d.refused(&Proclaim{Session: s, Name: "jobs/e", Value: "b"}, CodeUnauthorized)
	d.refused(&Proclaim{Session: s, Name: "other/e", Value: "b", Authority: auth(jobs)}, CodeForbidden)
	d.must(&Proclaim{Session: s, Name: "jobs/e", Value: "b", Authority: auth(jobs)})
	d.must(&Proclaim{Session: s, Name: "jobs/e", Value: "c", Authority: auth(admin)})
	if got, _ := d.holdValue(s, "jobs/e"); got != "c" {
		t.Fatalf("value %q, want c", got)
	}
}

// Values are part of the state: the digest covers them (a table without
// any digests as before they existed: see fsm's golden snapshots), and an
// export carries them through a load.
func TestHoldValueState(t *testing.T) {
	build := func(value, waiting string) *driver {
		d := newDriver(t)
		s1, s2 := d.session(), d.session()
		d.must(&Acquire{Session: s1, Locks: []LockSpec{{Name: "e", Mode: Write, Value: value}}})
		d.must(&Acquire{Session: s2, Locks: []LockSpec{{Name: "e", Mode: Write, Value: waiting}}, Wait: time.Minute})
		return d
	}
	seen := map[[32]byte]string{build("", "").tab.Digest(): "no values"}
	for _, tc := range []struct{ value, waiting string }{{"a", ""}, {"", "a"}, {"a", "b"}, {"b", "a"}, {"b", "b"}} {
		d := build(tc.value, tc.waiting)
		what := tc.value + "/" + tc.waiting
		if other, dup := seen[d.tab.Digest()]; dup {
			t.Errorf("values %s digest as %s", what, other)
		}
		seen[d.tab.Digest()] = what
		loaded, err := roundTrip(d.tab)
		if err != nil {
			t.Fatal(err)
		}
		if loaded.Digest() != d.tab.Digest() {
			t.Errorf("values %q/%q: a loaded table digests otherwise", tc.value, tc.waiting)
		}
		li, _ := loaded.Lock("e")
		if len(li.Holders) != 1 || li.Holders[0].Value != tc.value {
			t.Errorf("values %q/%q: loaded holders %+v", tc.value, tc.waiting, li.Holders)
		}
		// The waiter's value comes with its grant, also in the loaded table.
		d2 := &driver{t: t, tab: loaded, index: d.index, now: d.now}
		d2.release(SessionID(1), "e")
		if got, held := d2.holdValue(SessionID(2), "e"); !held || got != tc.waiting {
			t.Errorf("values %q/%q: the waiter granted with %q (held %v)", tc.value, tc.waiting, got, held)
		}
	}
}

func TestLeader(t *testing.T) {
	h := func(token uint64, value string) Holder { return Holder{Token: token, Value: value} }
	for _, tc := range []struct {
		name    string
		holders []Holder
		want    Holder
		ok      bool
	}{
		{"nobody", nil, Holder{}, false},
		{"one holder", []Holder{h(7, "a")}, h(7, "a"), true},
		{"the smallest token leads", []Holder{h(9, "b"), h(7, "a"), h(12, "c")}, h(7, "a"), true},
	} {
		li := LockInfo{Holders: tc.holders}
		if got, ok := li.Leader(); ok != tc.ok || got != tc.want {
			t.Errorf("%s: Leader() = %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
