package fsm

import (
	"bufio"
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// Tokens of aclState. jobsToken sorts before mgmtToken, so that Export's
// order (by id) is not the order of creation.
const (
	mgmtToken = "f0e0d0c0-b0a0-4908-8706-050403020100"
	jobsToken = "1a2b3c4d-0000-4000-8000-00000000beef"
	goneToken = "77777777-7777-4777-8777-777777777777"
	plainKey  = "kPlainSessionKey_00001"
	jobsKey   = "kJobsSessionKey-000002"
)

func testHash(n byte) string { return strings.Repeat(string("0123456789abcdef"[n]), 64) }

// aclState builds a table with every record of snapshot format 3: a
// session with a key from before ACLs, the ACL state, a management token,
// one for jobs/ and a deleted one, a session owned by the jobs token with
// a key, a revoked hold, a hold and a pending request. It returns the
// driver.
func aclState(t testing.TB) *driver {
	t.Helper()
	d := newDriver(t)
	plain := d.session(func(c *lockstate.CreateSession) { c.Key = plainKey; c.Name = "plain" })
	d.must(&lockstate.Acquire{Session: plain, RequestID: "p1", Locks: []lockstate.LockSpec{lock("jobs/1", lockstate.Write)}})
	d.must(&lockstate.BootstrapACL{ID: mgmtToken, Hash: testHash(0)})
	d.must(&lockstate.CreateToken{Authority: lockstate.Authority{Auth: mgmtToken}, ID: jobsToken, Hash: testHash(1), Name: "jobs",
		Rules: []lockstate.Rule{{Prefix: "jobs/", Access: lockstate.AccessWrite}, {Prefix: "", Access: lockstate.AccessRead}}})
	d.must(&lockstate.CreateToken{Authority: lockstate.Authority{Auth: mgmtToken}, ID: goneToken, Hash: testHash(2),
		Rules: []lockstate.Rule{{Prefix: "x", Access: lockstate.AccessRead}}})
	d.must(&lockstate.DeleteToken{Authority: lockstate.Authority{Auth: mgmtToken}, ID: goneToken})
	jobs := d.session(func(c *lockstate.CreateSession) {
		c.Key, c.Auth, c.Limits = jobsKey, jobsToken, &lockstate.Limits{Sessions: 10}
	})
	d.must(&lockstate.Acquire{Session: jobs, Authority: lockstate.Authority{Auth: jobsToken}, RequestID: "j1",
		Locks: []lockstate.LockSpec{lock("jobs/2", lockstate.Write)}, Limits: &lockstate.Limits{HoldsPerSession: 5}})
	d.must(&lockstate.Revoke{Name: "jobs/2", Authority: lockstate.Authority{Auth: mgmtToken}})
	d.must(&lockstate.Acquire{Session: jobs, Authority: lockstate.Authority{Auth: jobsToken}, RequestID: "j2",
		Locks: []lockstate.LockSpec{lock("jobs/3", lockstate.Write)}})
	d.must(&lockstate.Acquire{Session: jobs, Authority: lockstate.Authority{Auth: jobsToken}, RequestID: "j3", Wait: 30 * time.Second,
		Locks: []lockstate.LockSpec{lock("jobs/1", lockstate.Write)}}) // waits for plain
	d.advance(time.Second)
	return d
}

// exportOf returns f's export records.
func exportOf(f *FSM) (recs []lockstate.Record) {
	f.Read(func(t *lockstate.Table) {
		_ = t.Export(func(rec lockstate.Record) error { recs = append(recs, rec); return nil })
	})
	return recs
}

// snapshotFormatOf returns the format in a snapshot stream's header.
func snapshotFormatOf(t testing.TB, b []byte) int {
	t.Helper()
	hdr, _, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	return hdr.Format
}

// aclView is what a node answers from the ACL state: the tokens, lookups
// by hash and by session key, and the sessions' owners and revocations.
func aclView(f *FSM) (out []any) {
	f.Read(func(t *lockstate.Table) {
		for _, ti := range t.Tokens() {
			out = append(out, ti.ID, ti.Name, ti.Rules, ti.Created)
		}
		for n := range byte(4) {
			ti, ok := t.TokenByHash(testHash(n))
			out = append(out, ti.ID, ok)
		}
		for _, key := range []string{plainKey, jobsKey, "kNoSuchSessionKey_0000"} {
			id, ok := t.SessionByKey(key)
			info, _ := t.Session(id)
			out = append(out, id, ok, info)
		}
		out = append(out, t.ACLBootstrapped())
	})
	return out
}

// TestSnapshotACLRestore: a table with ACL state snapshots in format 3 and
// restores to the same digest, records, tokens, keys and owners; the
// restored FSM then applies the same entries with the same results; and
// its own snapshot is the same bytes.
func TestSnapshotACLRestore(t *testing.T) {
	d := aclState(t)
	snap := snapshotBytes(t, d.f.FSM)
	if got := snapshotFormatOf(t, snap); got != snapshotFormat3 {
		t.Fatalf("snapshot format %d, want %d", got, snapshotFormat3)
	}
	f := newTestFSM(t)
	seedOther(t, f)
	if err := restoreBytes(f.FSM, snap); err != nil {
		t.Fatal(err)
	}
	sameState(t, "restored", d.f.FSM, f.FSM)
	if a, b := exportOf(d.f.FSM), exportOf(f.FSM); !reflect.DeepEqual(a, b) {
		t.Fatalf("export records differ:\n%v\n%v", a, b)
	}
	if a, b := aclView(d.f.FSM), aclView(f.FSM); !reflect.DeepEqual(a, b) {
		t.Fatalf("ACL views differ:\n%v\n%v", a, b)
	}
	if again := snapshotBytes(t, f.FSM); !bytes.Equal(again, snap) {
		t.Fatal("the restored table snapshots differently")
	}
	kinds := map[string]int{}
	for _, rec := range exportOf(f.FSM) {
		kinds[reflect.TypeOf(rec).Elem().Name()]++
	}
	if kinds["SessionExtraRecord"] != 2 || kinds["ACLRecord"] != 1 || kinds["TokenRecord"] != 2 {
		t.Fatalf("records %v: aclState lacks what it should test", kinds)
	}
	continueBoth(t, d, f)
}

// continueBoth applies the same entries, ACL-checked, to d's FSM and to f,
// comparing results and state after each.
func continueBoth(t *testing.T, d *driver, f *testFSM) {
	var plain, jobs lockstate.SessionID
	f.Read(func(t *lockstate.Table) {
		plain, _ = t.SessionByKey(plainKey)
		jobs, _ = t.SessionByKey(jobsKey)
	})
	read := []lockstate.Rule{{Prefix: "a", Access: lockstate.AccessRead}}
	steps := []struct {
		cmd  lockstate.Command
		code lockstate.Code // "": applied
	}{
		{&lockstate.CreateSession{TTL: time.Minute, Key: jobsKey, Authority: lockstate.Authority{Auth: jobsToken}}, lockstate.CodeInvalid}, // key in use
		{&lockstate.CreateSession{TTL: time.Minute, Key: "kThirdSessionKey_00003", Authority: lockstate.Authority{Auth: goneToken}}, lockstate.CodeUnauthorized},
		{&lockstate.Acquire{Session: plain, Authority: lockstate.Authority{Auth: jobsToken}, Locks: []lockstate.LockSpec{lock("jobs/4", lockstate.Write)}}, lockstate.CodeNoSession}, // another token's: as if absent
		{&lockstate.Release{Session: plain, Authority: lockstate.Authority{Auth: mgmtToken}, Name: "jobs/1"}, ""},                                                                    // j3 granted
		{&lockstate.Revoke{Name: "jobs/1", Authority: lockstate.Authority{Auth: jobsToken}}, lockstate.CodeForbidden},
		{&lockstate.Revoke{Name: "jobs/1", Authority: lockstate.Authority{Auth: mgmtToken}}, ""},
		{&lockstate.CreateToken{Authority: lockstate.Authority{Auth: jobsToken}, ID: goneToken, Hash: testHash(3), Rules: read}, lockstate.CodeForbidden},
		{&lockstate.CreateToken{Authority: lockstate.Authority{Auth: mgmtToken}, ID: goneToken, Hash: testHash(1), Rules: read}, lockstate.CodeInvalid}, // hash in use
		{&lockstate.DeleteToken{Authority: lockstate.Authority{Auth: mgmtToken}, ID: jobsToken}, ""},
		{&lockstate.Cancel{Session: jobs, Authority: lockstate.Authority{Auth: jobsToken}, RequestID: "j3"}, lockstate.CodeUnauthorized}, // its token is gone
		{&lockstate.CloseSession{Session: jobs, Authority: lockstate.Authority{Auth: mgmtToken}}, ""},
		{&lockstate.Tick{}, ""},
	}
	for i, st := range steps {
		d.index++
		d.now += int64(time.Second)
		data, err := Encode(d.now, st.cmd)
		if err != nil {
			t.Fatal(err)
		}
		want := d.f.applyRaw(d.index, data)
		if got := f.applyRaw(d.index, data); !reflect.DeepEqual(got, want) {
			t.Fatalf("entry %d %T: results differ:\n%+v\n%+v", i, st.cmd, want, got)
		}
		var code lockstate.Code
		if res := want.(*lockstate.Result); res.Err != nil {
			code = res.Err.Code
		}
		if code != st.code {
			t.Errorf("entry %d %T: %q, want %q", i, st.cmd, code, st.code)
		}
		sameState(t, "after "+itoa(i), d.f.FSM, f.FSM)
	}
	if a, b := aclView(d.f.FSM), aclView(f.FSM); !reflect.DeepEqual(a, b) {
		t.Fatalf("ACL views differ:\n%v\n%v", a, b)
	}
}

// TestSnapshotFormatByContent: Persist writes format 6 only for a table
// where two sessions share a request id, format 5 only for one that denies
// a certificate, format 4 only for a table
// with a token that has its own limits, format 3 only for a table with
// ACL records (a session key, an owner, a revocation, the ACL state), and
// format 2 otherwise, even after ACL commands that changed nothing.
func TestSnapshotFormatByContent(t *testing.T) {
	write := func(s lockstate.SessionID, name string) *lockstate.Acquire {
		return &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock(name, lockstate.Write)}}
	}
	cases := []struct {
		name  string
		build func(d *driver)
		want  int
	}{
		{"empty", func(*driver) {}, snapshotFormat2},
		{"rich", func(d *driver) { *d = *richState(t) }, snapshotFormat2},
		{"refused and no-op ACL commands", func(d *driver) {
			s := d.session()
			d.apply(&lockstate.CreateToken{Authority: lockstate.Authority{Auth: mgmtToken}, ID: jobsToken, Hash: testHash(1),
				Rules: []lockstate.Rule{{Prefix: "", Access: lockstate.AccessRead}}}) // no such token
			d.must(&lockstate.Revoke{Name: "nobody/holds/this"})
			d.must(&lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock("a", lockstate.Write)}, Limits: &lockstate.Limits{Waiters: 3}})
		}, snapshotFormat2},
		{"keyed session closed", func(d *driver) {
			s := d.session(func(c *lockstate.CreateSession) { c.Key = plainKey })
			d.must(&lockstate.CloseSession{Session: s})
		}, snapshotFormat2},
		{"session key", func(d *driver) { d.session(func(c *lockstate.CreateSession) { c.Key = plainKey }) }, snapshotFormat3},
		{"revocation", func(d *driver) {
			d.must(write(d.session(), "a"))
			d.must(&lockstate.Revoke{Name: "a"})
		}, snapshotFormat3},
		{"bootstrapped only", func(d *driver) { d.must(&lockstate.BootstrapACL{ID: mgmtToken, Hash: testHash(0)}) }, snapshotFormat3},
		{"acl", func(d *driver) { *d = *aclState(t) }, snapshotFormat3},
		{"token limits", func(d *driver) {
			*d = *aclState(t)
			d.must(&lockstate.CreateToken{Authority: lockstate.Authority{Auth: mgmtToken}, ID: goneToken, Hash: testHash(3), Name: "capped",
				Rules:  []lockstate.Rule{{Prefix: "x", Access: lockstate.AccessWrite}},
				Limits: &lockstate.TokenLimits{Sessions: 3, Waiters: lockstate.NoLimit}})
		}, snapshotFormat4},
		{"denied certificate", func(d *driver) {
			d.must(&lockstate.DenyCert{Serial: "1f00", Reason: "leaked"})
		}, snapshotFormat5},
		{"denied certificate with acl", func(d *driver) {
			*d = *aclState(t)
			d.must(&lockstate.DenyCert{Authority: lockstate.Authority{Auth: mgmtToken}, Serial: "ab"})
			d.must(&lockstate.DenyCert{Serial: "1"})
		}, snapshotFormat5},
		{"scoped request ids, none shared", func(d *driver) {
			for _, name := range []string{"a", "b"} {
				d.must(scoped(d.session(), "job-"+name, name))
			}
		}, snapshotFormat2},
		{"request id shared by two sessions", func(d *driver) {
			for _, name := range []string{"a", "b"} {
				d.must(scoped(d.session(), "job", name))
			}
		}, snapshotFormatSharedIDs},
		{"shared request id forgotten", func(d *driver) {
			a, b := d.session(), d.session()
			d.must(scoped(a, "job", "a"))
			d.must(scoped(b, "job", "b"))
			d.must(&lockstate.CloseSession{Session: a})
		}, snapshotFormat2},
		{"request id shared, with acl and a denied certificate", func(d *driver) {
			*d = *aclState(t)
			d.must(&lockstate.DenyCert{Authority: lockstate.Authority{Auth: mgmtToken}, Serial: "ab"})
			for _, name := range []string{"a", "b"} {
				s := d.session(func(c *lockstate.CreateSession) { c.Auth = mgmtToken })
				c := scoped(s, "job", name)
				c.Auth = mgmtToken
				d.must(c)
			}
		}, snapshotFormatSharedIDs},
		{"a hold with a value", func(d *driver) { d.must(valued(d.session(), "e", "10.0.0.7:8080", 0)) }, snapshotFormatHoldValues},
		{"a waiter with a value", func(d *driver) {
			d.must(write(d.session(), "e"))
			d.must(valued(d.session(), "e", "10.0.0.7:8080", time.Minute))
		}, snapshotFormatHoldValues},
		{"a value proclaimed", func(d *driver) {
			s := d.session()
			d.must(write(s, "e"))
			d.must(&lockstate.Proclaim{Session: s, Name: "e", Value: "10.0.0.7:8080"})
		}, snapshotFormatHoldValues},
		{"a value proclaimed and cleared", func(d *driver) {
			s := d.session()
			d.must(write(s, "e"))
			d.must(&lockstate.Proclaim{Session: s, Name: "e", Value: "10.0.0.7:8080"})
			d.must(&lockstate.Proclaim{Session: s, Name: "e"})
		}, snapshotFormat2},
		{"a value cleared, its request remembered", func(d *driver) {
			s := d.session()
			d.must(valued(s, "e", "10.0.0.7:8080", 0))
			d.must(&lockstate.Proclaim{Session: s, Name: "e"})
		}, snapshotFormatHoldValues},
		{"a valued hold released", func(d *driver) {
			s := d.session()
			d.must(valued(s, "e", "10.0.0.7:8080", 0))
			d.must(&lockstate.Release{Session: s, Name: "e"})
			d.must(&lockstate.CloseSession{Session: s}) // forgets the request that carried the value
		}, snapshotFormat2},
		{"values with shared request ids", func(d *driver) {
			*d = *holdValuesState(t)
		}, snapshotFormatHoldValues},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t)
			c.build(d)
			snap := snapshotBytes(t, d.f.FSM)
			if got := snapshotFormatOf(t, snap); got != c.want {
				t.Fatalf("snapshot format %d, want %d", got, c.want)
			}
			f := newTestFSM(t)
			if err := restoreBytes(f.FSM, snap); err != nil {
				t.Fatal(err)
			}
			sameState(t, "restored", d.f.FSM, f.FSM)
		})
	}
}

// scoped is an acquire of name with id scoped to session s, as a leader
// writes it since FormatSessionRequestIDs.
func scoped(s lockstate.SessionID, id, name string) *lockstate.Acquire {
	return &lockstate.Acquire{Session: s, RequestID: id, SessionScoped: true,
		Locks: []lockstate.LockSpec{lock(name, lockstate.Write)}}
}

// valued is an acquire of name in write mode whose hold takes value.
func valued(s lockstate.SessionID, name, value string, wait time.Duration) *lockstate.Acquire {
	l := lock(name, lockstate.Write)
	l.Value = value
	return &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{l}, Wait: wait}
}

// TestRestoreValuesNeedFormat7: a stream of a format before 7 whose holds
// or locks carry a value is refused (that format cannot hold them, so the
// stream is not what it says), and the FSM keeps its state; the same
// records as format 7 restore.
func TestRestoreValuesNeedFormat7(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(d *driver)
		kind  string
	}{
		{"a hold", func(d *driver) { d.must(valued(d.session(), "e", "v", 0)) }, "node"},
		{"a waiter", func(d *driver) {
			d.must(valued(d.session(), "e", "", 0))
			d.must(valued(d.session(), "e", "v", time.Minute))
		}, "request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			tc.build(d)
			f := unframe(t, snapshotBytes(t, d.f.FSM))
			if f.hdr.Format != snapshotFormatHoldValues {
				t.Fatalf("snapshot format %d, want %d", f.hdr.Format, snapshotFormatHoldValues)
			}
			for _, format := range []int{snapshotFormat2, snapshotFormatSharedIDs, snapshotFormatHoldValues} {
				head := appendSnapshotHeader(appendTag(nil, recHeader), &snapshotHeader{Format: format, Applied: f.hdr.Applied})
				fsm := newTestFSM(t)
				seedOther(t, fsm)
				before := fsm.Digest()
				err := restoreBytes(fsm.FSM, frame(t, head, f.payload, chunkSize))
				switch {
				case format == snapshotFormatHoldValues && err != nil:
					t.Fatalf("format %d: %v", format, err)
				case format == snapshotFormatHoldValues:
					sameState(t, "restored", d.f.FSM, fsm.FSM)
				case err == nil || !strings.Contains(err.Error(), "("+tc.kind+"): only format 7 carries it"):
					t.Fatalf("format %d: restore error %v", format, err)
				case fsm.Digest() != before:
					t.Fatalf("format %d: a refused restore changed the FSM", format)
				}
			}
		})
	}
}

// TestRestoreRejectsACLRecords: the format 3 records come only in format 3,
// after the requests and before the end, in Export's order, with at most
// one ACL record.
func TestRestoreRejectsACLRecords(t *testing.T) {
	good := snapshotBytes(t, aclState(t).f.FSM)
	f := unframe(t, good)
	spans := records(t, f.payload)
	var req, extra, acl, tok recordSpan
	for _, s := range spans {
		switch s.typ {
		case recRequest:
			req = s
		case recSessionExtra:
			extra = s
		case recACL:
			acl = s
		case recToken:
			tok = s
		}
	}
	rec := func(s recordSpan) []byte { return f.payload[s.start:s.end] }
	// with moves the record at s to just before the one at before (end
	// offsets), or copies it there if dup.
	with := func(s recordSpan, before int, dup bool) []byte {
		var p []byte
		for i := 0; i < len(f.payload); {
			if i == before {
				p = append(p, rec(s)...)
			}
			if i == s.start && !dup {
				i = s.end
				continue
			}
			p = append(p, f.payload[i])
			i++
		}
		return p
	}
	head2 := appendSnapshotHeader(appendTag(nil, recHeader), &snapshotHeader{Format: snapshotFormat2, Applied: f.hdr.Applied})
	cases := map[string][]byte{
		"acl records in format 2":  frame(t, head2, f.payload, chunkSize),
		"extra before a request":   frame(t, f.head, with(extra, req.start, false), chunkSize),
		"token before the acl":     frame(t, f.head, with(tok, acl.start, false), chunkSize),
		"acl before an extra":      frame(t, f.head, with(acl, extra.start, false), chunkSize),
		"two acl records":          frame(t, f.head, with(acl, acl.start, true), chunkSize),
		"extra after the tokens":   frame(t, f.head, with(extra, spans[len(spans)-1].start, false), chunkSize),
		"format 4":                 frame(t, appendSnapshotHeader(appendTag(nil, recHeader), &snapshotHeader{Format: SnapshotFormat + 1, Applied: f.hdr.Applied}), f.payload, chunkSize),
		"token in a format 1 file": append(legacyHead(f.hdr), f.payload[tok.start:tok.end]...),
	}
	if err := restoreBytes(newTestFSM(t).FSM, frame(t, f.head, f.payload, 100)); err != nil {
		t.Fatalf("the reframed base: %v", err)
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			fsm := newTestFSM(t)
			seedOther(t, fsm)
			before := fsm.Digest()
			err := restoreBytes(fsm.FSM, b)
			if err == nil {
				t.Fatal("restore succeeded")
			}
			if !strings.Contains(err.Error(), "out of order or unknown") && !strings.Contains(err.Error(), "snapshot format") {
				t.Errorf("error %q", err)
			}
			if fsm.Digest() != before {
				t.Fatal("failed restore changed the FSM")
			}
		})
	}
}

// legacyHead is a format 1 stream's start: the header and the table
// header of an empty table at hdr.Applied.
func legacyHead(hdr snapshotHeader) []byte {
	hdr.Format = snapshotFormat1
	b := appendSnapshotHeader(appendTag(nil, recHeader), &hdr)
	return appendHeader(appendTag(b, recTable), &lockstate.Header{Format: lockstate.FormatVersion, Index: hdr.Applied})
}

// TestSnapshotACLRecordsAcrossChunks: format 3 records cut across chunks
// of any size still restore.
func TestSnapshotACLRecordsAcrossChunks(t *testing.T) {
	d := aclState(t)
	f := unframe(t, snapshotBytes(t, d.f.FSM))
	for _, size := range []int{1, 7, 64, 1000} {
		g := newTestFSM(t)
		if err := restoreBytes(g.FSM, frame(t, f.head, f.payload, size)); err != nil {
			t.Fatalf("chunks of %d: %v", size, err)
		}
		sameState(t, "chunks of "+itoa(size), d.f.FSM, g.FSM)
	}
}

// TestRestoreSharedRequestIDsNeedFormat6: a stream of a format before 6
// whose sessions share a request id is refused (that format cannot hold
// it, so the stream is not what it says), and the FSM keeps its state;
// the same records as format 6 restore.
func TestRestoreSharedRequestIDsNeedFormat6(t *testing.T) {
	d := newDriver(t)
	for _, name := range []string{"a", "b"} {
		d.must(scoped(d.session(), "job", name))
	}
	f := unframe(t, snapshotBytes(t, d.f.FSM))
	if f.hdr.Format != snapshotFormatSharedIDs {
		t.Fatalf("snapshot format %d, want %d", f.hdr.Format, snapshotFormatSharedIDs)
	}
	for _, format := range []int{snapshotFormat2, snapshotFormat5, snapshotFormatSharedIDs} {
		head := appendSnapshotHeader(appendTag(nil, recHeader), &snapshotHeader{Format: format, Applied: f.hdr.Applied})
		fsm := newTestFSM(t)
		seedOther(t, fsm)
		before := fsm.Digest()
		err := restoreBytes(fsm.FSM, frame(t, head, f.payload, chunkSize))
		switch {
		case format == snapshotFormatSharedIDs && err != nil:
			t.Fatalf("format %d: %v", format, err)
		case format == snapshotFormatSharedIDs:
			sameState(t, "restored", d.f.FSM, fsm.FSM)
		case err == nil || !strings.Contains(err.Error(), "share request ids"):
			t.Fatalf("format %d: restore error %v", format, err)
		case fsm.Digest() != before:
			t.Fatalf("format %d: a refused restore changed the table", format)
		}
	}
}
