package lockservice_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// tokensWorld is a service with ACLs and three tokens: root (management),
// db (write on db/) and jobs (write on jobs/), with a context for each.
type tokensWorld struct {
	svc          *lockservice.Service
	root, db, jb context.Context
}

func newTokensWorld(t *testing.T) *tokensWorld {
	t.Helper()
	svc, _ := startService(t, raftnode.Config{}, nil)
	ctx := context.Background()
	root, err := svc.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	as := func(id string) context.Context { return lockservice.WithCaller(ctx, lockservice.Caller{TokenID: id}) }
	w := &tokensWorld{svc: svc, root: as(root.ID)}
	for _, tc := range []struct {
		prefix string
		ctx    *context.Context
	}{{"db/", &w.db}, {"jobs/", &w.jb}} {
		tok, err := svc.CreateToken(w.root, tc.prefix, []lockstate.Rule{{Prefix: tc.prefix, Access: lockstate.AccessWrite}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		*tc.ctx = as(tok.ID)
	}
	return w
}

func (w *tokensWorld) session(t *testing.T, ctx context.Context) string {
	t.Helper()
	_, key, err := w.svc.CreateSession(ctx, &lockstate.CreateSession{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func (w *tokensWorld) acquire(ctx context.Context, session, name, id string, wait time.Duration) (*lockstate.RequestInfo, error) {
	return w.svc.Acquire(ctx, session, &lockstate.Acquire{RequestID: id, Wait: wait,
		Locks: []lockstate.LockSpec{{Name: name, Mode: lockstate.Write}}})
}

// grant takes name for session at once or fails the test.
func (w *tokensWorld) grant(t *testing.T, ctx context.Context, session, name, id string) *lockstate.RequestInfo {
	t.Helper()
	info, err := w.acquire(ctx, session, name, id, 0)
	return mustGrant(t, info, err)
}

// waitPending waits until session's request id is pending.
func (w *tokensWorld) waitPending(t *testing.T, ctx context.Context, session, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := w.svc.Request(ctx, lockservice.Stale, session, id, 0)
		if err == nil && info.Status == lockstate.Pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("request %s of %s never pending: %+v, %v", id, session, info, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// notFound checks that err is the refusal of an unused request id: the
// same code and words, so that nothing tells another token's request apart.
func notFound(t *testing.T, what string, err error, id string) {
	t.Helper()
	le, ok := err.(*lockstate.Error)
	if !ok || le.Code != lockstate.CodeNoRequest || le.Message != fmt.Sprintf("request %q not found", id) {
		t.Fatalf("%s: %v; want the refusal of an unused id", what, err)
	}
}

// Two tokens' sessions use one request id: each is granted on its own, a
// lookup by id finds the caller's own (a management token must say which
// session), and another token's is neither revealed nor in the way.
func TestTwoTokensShareARequestID(t *testing.T) {
	w := newTokensWorld(t)
	sdb, sjobs := w.session(t, w.db), w.session(t, w.jb)
	gdb := w.grant(t, w.db, sdb, "db/a", "job")
	gjobs := w.grant(t, w.jb, sjobs, "jobs/a", "job")
	if gdb.Session == gjobs.Session || gdb.Token == gjobs.Token {
		t.Fatalf("one grant for two sessions: %+v %+v", gdb, gjobs)
	}
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		session  string
		want     lockstate.SessionID // 0: refused with code
		code     lockstate.Code
		notFound bool
	}{
		{"db's own", w.db, "", gdb.Session, "", false},
		{"jobs's own", w.jb, "", gjobs.Session, "", false},
		{"jobs's own, by session", w.jb, sjobs, gjobs.Session, "", false},
		{"db's through jobs's session", w.db, sjobs, 0, lockstate.CodeNoRequest, true},
		{"management without a session", w.root, "", 0, lockstate.CodeInvalid, false},
		{"management with db's session", w.root, sdb, gdb.Session, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := w.svc.Request(tc.ctx, lockservice.Linearizable, tc.session, "job", 0)
			switch {
			case tc.notFound:
				notFound(t, "GET", err, "job")
			case tc.code != "" && code(err) != tc.code:
				t.Fatalf("GET: %+v, %v; want %s", got, err, tc.code)
			case tc.code == "" && (err != nil || got.Session != tc.want || got.Status != lockstate.Granted):
				t.Fatalf("GET: %+v, %v; want session %d's grant", got, err, tc.want)
			}
		})
	}
	// A retry is its own session's: never the other's grant, never refused.
	if again := w.grant(t, w.jb, sjobs, "jobs/b", "job"); again.Token != gjobs.Token {
		t.Fatalf("jobs's retry: %+v, want its first grant %+v", again, gjobs)
	}
	// The released grant of one does not change the other's.
	if _, err := w.svc.Release(w.db, sdb, &lockstate.Release{RequestID: "job"}); err != nil {
		t.Fatal(err)
	}
	if got, err := w.svc.Request(w.jb, lockservice.Linearizable, "", "job", 0); err != nil || got.Status != lockstate.Granted {
		t.Fatalf("jobs's request after db released its own: %+v, %v", got, err)
	}
}

// Cancels and long-polls by id act on the caller's own request: another
// token's pending request with the same id stays pending, and a poll
// answers for its own request only.
func TestCancelAndPollFindTheCallersOwn(t *testing.T) {
	w := newTokensWorld(t)
	hdb, hjobs := w.session(t, w.db), w.session(t, w.jb)
	w.grant(t, w.db, hdb, "db/a", "")
	for _, name := range []string{"jobs/a", "jobs/b", "jobs/c"} { // separate names: no wait-for cycle
		w.grant(t, w.jb, hjobs, name, "")
	}
	wdb, wjobs, wjobs2 := w.session(t, w.db), w.session(t, w.jb), w.session(t, w.jb)
	type answer struct {
		info *lockstate.RequestInfo
		err  error
	}
	wait := func(ctx context.Context, session, name, id string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			info, err := w.acquire(ctx, session, name, id, 20*time.Second)
			ch <- answer{info, err}
		}()
		w.waitPending(t, ctx, session, id)
		return ch
	}
	dbWaits := wait(w.db, wdb, "db/a", "w")
	jobsWaits := wait(w.jb, wjobs, "jobs/a", "w")
	jobs2Waits := wait(w.jb, wjobs2, "jobs/b", "two")
	jobsTwoWaits := wait(w.jb, wjobs, "jobs/c", "two")

	// db's cancel through jobs's session: not found, and nothing changes.
	_, err := w.svc.Cancel(w.db, wjobs, &lockstate.Cancel{RequestID: "w"})
	notFound(t, "db's cancel through jobs's session", err, "w")
	// Two of jobs's own sessions wait with "two": the cancel must say which.
	if _, err := w.svc.Cancel(w.jb, "", &lockstate.Cancel{RequestID: "two"}); code(err) != lockstate.CodeInvalid {
		t.Fatalf("a cancel of an id two of the caller's sessions use: %v, want invalid_request", err)
	}
	if got, err := w.svc.Cancel(w.jb, wjobs2, &lockstate.Cancel{RequestID: "two"}); err != nil || got.Session == 0 || got.Status != lockstate.Cancelled {
		t.Fatalf("cancel with the session: %+v, %v", got, err)
	}
	if a := <-jobs2Waits; code(a.err) != lockservice.CodeCancelled {
		t.Fatalf("the cancelled acquire: %+v, %v", a.info, a.err)
	}

	// A long-poll of db's "w" while jobs's "w" is cancelled answers for db's.
	polled := make(chan answer, 1)
	go func() {
		info, err := w.svc.Request(w.db, lockservice.Linearizable, "", "w", 20*time.Second)
		polled <- answer{info, err}
	}()
	got, err := w.svc.Cancel(w.jb, "", &lockstate.Cancel{RequestID: "w"})
	if err != nil || got.Status != lockstate.Cancelled {
		t.Fatalf("jobs's cancel of its own: %+v, %v", got, err)
	}
	if a := <-jobsWaits; code(a.err) != lockservice.CodeCancelled {
		t.Fatalf("jobs's cancelled acquire: %+v, %v", a.info, a.err)
	}
	if info, err := w.svc.Request(w.db, lockservice.Linearizable, wdb, "w", 0); err != nil || info.Status != lockstate.Pending {
		t.Fatalf("db's request after jobs cancelled its own: %+v, %v", info, err)
	}
	if _, err := w.svc.Release(w.db, hdb, &lockstate.Release{Name: "db/a"}); err != nil {
		t.Fatal(err)
	}
	granted := <-dbWaits
	mustGrant(t, granted.info, granted.err)
	if a := <-polled; a.err != nil || a.info.Status != lockstate.Granted || a.info.Session != granted.info.Session {
		t.Fatalf("db's long-poll: %+v, %v; want db's grant %+v", a.info, a.err, granted.info)
	}
	if _, err := w.svc.Release(w.jb, hjobs, &lockstate.Release{Name: "jobs/c"}); err != nil {
		t.Fatal(err)
	}
	a := <-jobsTwoWaits
	mustGrant(t, a.info, a.err)
}
