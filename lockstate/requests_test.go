package lockstate

import (
	"fmt"
	"testing"
	"time"
)

// TestRequestIDsPerSession: an acquire scoped to its session (the leader's
// flag since fsm.FormatSessionRequestIDs) may use an id another session
// uses, and is granted on its own; an acquire without the flag keeps the
// rule of the entries written before, refusing it. A retry finds the
// session's own request under either rule.
func TestRequestIDsPerSession(t *testing.T) {
	type step struct {
		sess   int // index into the case's sessions
		name   string
		scoped bool
		want   Code // "" for a grant
		sameAs int  // 1-based step whose request this one must be (a retry); 0 for a new one
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"scoped: two sessions, one id, both granted", []step{
			{sess: 0, name: "x", scoped: true},
			{sess: 1, name: "y", scoped: true},
			{sess: 0, name: "x", scoped: true, sameAs: 1},
			{sess: 1, name: "y", scoped: true, sameAs: 2},
		}},
		{"scoped after an unscoped request", []step{
			{sess: 0, name: "x"},
			{sess: 1, name: "y", scoped: true},
		}},
		{"unscoped: another session's id is refused", []step{
			{sess: 0, name: "x", scoped: true},
			{sess: 1, name: "y", want: CodeInvalid},
		}},
		{"unscoped: still refused once two sessions share it", []step{
			{sess: 0, name: "x", scoped: true},
			{sess: 1, name: "y", scoped: true},
			{sess: 2, name: "z", want: CodeInvalid},
		}},
		{"unscoped retry finds the session's own among shared", []step{
			{sess: 0, name: "x", scoped: true},
			{sess: 1, name: "y", scoped: true},
			{sess: 1, name: "other", sameAs: 2},
			{sess: 0, name: "other", sameAs: 1},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			ss := []SessionID{d.session(), d.session(), d.session()}
			got := make([]*RequestInfo, len(tc.steps))
			origin := make([]int, len(tc.steps)) // the step that made each step's request
			for i, st := range tc.steps {
				origin[i] = i
				if st.sameAs != 0 {
					origin[i] = origin[st.sameAs-1]
				}
				cmd := &Acquire{Session: ss[st.sess], RequestID: "job", SessionScoped: st.scoped,
					Locks: []LockSpec{{Name: st.name, Mode: Write}}}
				if st.want != "" {
					d.refused(cmd, st.want)
					continue
				}
				r := d.must(cmd).Request
				got[i] = r
				switch {
				case r.Status != Granted || r.Session != ss[st.sess]:
					t.Fatalf("step %d: %+v, want granted to session %d", i+1, r, ss[st.sess])
				case st.sameAs != 0 && (r.Token != got[st.sameAs-1].Token || r.Created != got[st.sameAs-1].Created):
					t.Fatalf("step %d: a retry made %+v, want step %d's %+v", i+1, r, st.sameAs, got[st.sameAs-1])
				case st.sameAs == 0 && r.Created != d.index:
					t.Fatalf("step %d: %+v, want a new request", i+1, r)
				}
			}
			for i, r := range got {
				if r == nil {
					continue
				}
				if v, ok := d.tab.Request(r.Session, "job"); !ok || v.Created != got[origin[i]].Created {
					t.Errorf("Request(%d, job) = %+v, %v", r.Session, v, ok)
				}
			}
		})
	}
}

// sharedIDs is a table with ACLs where sessions of two tokens (and two of
// one token) share request ids: jobs's sj and other's so both wait with
// id "x"; jobs's sj and sj2 both wait with id "y"; only other's so has "z".
// The holders of what they wait for share the id "h".
type sharedIDs struct {
	d                *driver
	sj, sj2, so      SessionID
	holdJobs, holdOt SessionID
}

func newSharedIDs(t *testing.T) *sharedIDs {
	d := aclDriver(t)
	f := &sharedIDs{d: d, sj: d.ownedSession(jobs), sj2: d.ownedSession(jobs), so: d.ownedSession(other),
		holdJobs: d.ownedSession(jobs), holdOt: d.ownedSession(other)}
	wait := func(s SessionID, tok int, id, name string) {
		d.must(&Acquire{Session: s, Authority: Authority{Auth: tokenID(tok)}, RequestID: id, SessionScoped: true,
			Wait: time.Minute, Locks: []LockSpec{{Name: name, Mode: Write}}})
	}
	wait(f.holdJobs, jobs, "h", "jobs/a")
	wait(f.holdJobs, jobs, "h2", "jobs/b")
	wait(f.holdOt, other, "h", "other/a")
	wait(f.sj, jobs, "x", "jobs/a")
	wait(f.so, other, "x", "other/a")
	wait(f.sj2, jobs, "y", "jobs/b")
	wait(f.sj, jobs, "y", "jobs/b")
	wait(f.so, other, "z", "other/a")
	if !d.tab.SharesRequestIDs() {
		t.Fatal("SharesRequestIDs is false")
	}
	return f
}

// TestFindRequest: a lookup or cancel by id finds the caller's own request
// (narrowed to a session when given); another token's request with the id
// is the same request_not_found as an unused id, and several of the
// caller's own are invalid_request asking for the session. Cancel, a log
// command, resolves by the same rule.
func TestFindRequest(t *testing.T) {
	f := newSharedIDs(t) // only for the sessions' ids: every case builds its own
	cases := []struct {
		tok     int
		session SessionID
		id      string
		want    SessionID // the request's session, 0 for a refusal
		code    Code
	}{
		{jobs, 0, "x", f.sj, ""},
		{other, 0, "x", f.so, ""},
		{admin, 0, "x", 0, CodeInvalid},
		{admin, f.so, "x", f.so, ""},
		{jobs, f.sj, "x", f.sj, ""},
		{jobs, f.so, "x", 0, CodeNoRequest},
		{jobs, 0, "z", 0, CodeNoRequest},    // other's only: as if unused
		{jobs, 0, "nope", 0, CodeNoRequest}, // unused
		{jobs, 0, "y", 0, CodeInvalid},      // two of jobs's own
		{jobs, f.sj2, "y", f.sj2, ""},
		{other, 0, "y", 0, CodeNoRequest},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("token %d session %d id %s", tc.tok, tc.session, tc.id)
		t.Run(name, func(t *testing.T) {
			f := newSharedIDs(t)
			got, err := f.d.tab.FindRequest(tokenID(tc.tok), tc.session, tc.id)
			checkFound(t, "FindRequest", got.Session, err, tc.want, tc.code, tc.id)
			cancel := &Cancel{Session: tc.session, RequestID: tc.id, Authority: Authority{Auth: tokenID(tc.tok)}}
			if tc.code != "" {
				f.d.refused(cancel, tc.code)
				return
			}
			res := f.d.must(cancel)
			checkFound(t, "Cancel", res.Request.Session, res.Err, tc.want, tc.code, tc.id)
			if res.Request.Status != Cancelled {
				t.Fatalf("cancel: %+v", res.Request)
			}
			for _, s := range []SessionID{f.sj, f.sj2, f.so} { // the others wait on
				if r, ok := f.d.tab.Request(s, tc.id); ok && s != tc.want && r.Status != Pending {
					t.Fatalf("session %d's request %s: %s", s, tc.id, r.Status)
				}
			}
		})
	}
}

func checkFound(t *testing.T, what string, got SessionID, err *Error, want SessionID, code Code, id string) {
	t.Helper()
	switch {
	case code == "" && (err != nil || got != want):
		t.Fatalf("%s: session %d, %v; want session %d", what, got, err, want)
	case code != "" && (err == nil || err.Code != code):
		t.Fatalf("%s: session %d, %v; want %s", what, got, err, code)
	case code == CodeNoRequest && err.Message != fmt.Sprintf("request %q not found", id):
		// The very words of an unused id: nothing tells another token's apart.
		t.Fatalf("%s: %q, not the refusal of an unused id", what, err.Message)
	}
}

// TestReleaseByRequestIDOwnOnly: a release by request id releases the
// session's own request's locks, never another session's with that id.
func TestReleaseByRequestIDOwnOnly(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	d.must(&Acquire{Session: a, RequestID: "job", SessionScoped: true, Locks: []LockSpec{{Name: "x", Mode: Write}}})
	d.must(&Acquire{Session: b, RequestID: "job", SessionScoped: true, Locks: []LockSpec{{Name: "y", Mode: Write}}})
	if res := d.must(&Release{Session: b, RequestID: "job"}); len(res.Released) != 1 || res.Released[0] != "y" {
		t.Fatalf("released %v, want [y]", res.Released)
	}
	if li, _ := d.tab.Lock("x"); len(li.Holders) != 1 || li.Holders[0].Session != a {
		t.Fatalf("x: %+v", li)
	}
	if r, _ := d.tab.Request(a, "job"); r.Status != Granted {
		t.Fatalf("a's request: %s", r.Status)
	}
	d.refused(&Release{Session: b, RequestID: "job"}, CodeNotHeld)
	c := d.session()
	d.refused(&Release{Session: c, RequestID: "job"}, CodeNoRequest)
}

// TestLoadSharedRequestIDs: a table whose sessions share ids exports and
// loads to the same table; a stream with one session's id twice is
// refused; once the sessions are gone, nothing is shared.
func TestLoadSharedRequestIDs(t *testing.T) {
	f := newSharedIDs(t)
	got, err := roundTrip(f.d.tab)
	if err != nil || got.Digest() != f.d.tab.Digest() || !got.SharesRequestIDs() {
		t.Fatalf("the loaded table differs (%v)", err)
	}
	for _, s := range []SessionID{f.sj, f.sj2, f.so} {
		want, _ := f.d.tab.Request(s, "x")
		if r, _ := got.Request(s, "x"); r.Created != want.Created {
			t.Fatalf("session %d's x: %+v, want %+v", s, r, want)
		}
	}
	recs := exportAll(f.d.tab)
	for i, rec := range recs {
		if r, ok := rec.(*RequestRecord); ok && r.Session == f.sj && r.ID == "x" {
			dup := *r
			dup.Seq += 1000
			h := *recs[0].(*Header)
			h.Requests++
			bad := append([]Record{&h}, recs[1:i+1]...)
			bad = append(bad, &dup)
			bad = append(bad, recs[i+1:]...)
			if _, err := loadAll(bad); err == nil {
				t.Fatal("a session's request id twice loads")
			}
			break
		}
	}
	for i, s := range []SessionID{f.sj, f.sj2, f.so, f.holdJobs, f.holdOt} {
		f.d.must(&CloseSession{Session: s, Authority: Authority{Auth: tokenID(admin)}})
		if want := i < 3; f.d.tab.SharesRequestIDs() != want { // the holders share "h" to the end
			t.Fatalf("SharesRequestIDs after closing %d sessions: %v", i+1, !want)
		}
	}
}
