package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/client"
)

// aclFixture starts a dev node with ACLs on, bootstraps it, and returns a
// management client and a client whose token may write jobs/.
func aclFixture(t *testing.T) (admin, jobs *client.Client, jobsToken *client.Token) {
	t.Helper()
	n, anon := devFixture(t, func(c *api.Config) { c.ACL = true })
	root, err := anon.BootstrapACL(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.BootstrapACL(ctxFor(t, 10*time.Second)); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("second bootstrap: %v, want ErrForbidden", err)
	}
	if admin, err = client.NewWith([]string{n.Addr}, client.WithToken(root.Secret)); err != nil {
		t.Fatal(err)
	}
	if jobsToken, err = admin.CreateToken(ctxFor(t, 10*time.Second), "jobs", client.Rule{Prefix: "jobs/", Access: "write"}); err != nil {
		t.Fatal(err)
	}
	if jobs, err = client.NewWith([]string{n.Addr}, client.WithToken(jobsToken.Secret)); err != nil {
		t.Fatal(err)
	}
	return admin, jobs, jobsToken
}

func TestClientACL(t *testing.T) {
	admin, jobs, tok := aclFixture(t)
	ctx := ctxFor(t, 30*time.Second)
	s := newSession(t, jobs, 10*time.Second)
	if _, err := s.Lock(ctx, "jobs/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryLock(ctx, "other/a"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("lock outside the token's prefix: %v, want ErrForbidden", err)
	}
	toks, err := admin.Tokens(ctx)
	if err != nil || len(toks) != 2 || toks[0].Secret != "" || toks[1].Secret != "" {
		t.Fatalf("tokens %+v, %v", toks, err)
	}
	if _, err := jobs.Tokens(ctx); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("tokens with a job token: %v", err)
	}
	if err := admin.DeleteToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.NewSession(ctx, 10*time.Second); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("deleted token: %v, want ErrUnauthorized", err)
	}
	// The session the deleted token made can no longer be kept alive by
	// it: the client says so instead of retrying until the TTL runs out.
	select {
	case <-s.Done():
		if !errors.Is(s.Err(), client.ErrUnauthorized) {
			t.Fatalf("session of a deleted token: Err %v", s.Err())
		}
	case <-ctx.Done():
		t.Fatal("the session of a deleted token is not reported lost")
	}
}

// TestNoToken: with ACLs on, a client without a token gets
// ErrUnauthorized for everything but the status.
func TestNoToken(t *testing.T) {
	n, anon := devFixture(t, func(c *api.Config) { c.ACL = true })
	ctx := ctxFor(t, 20*time.Second)
	if _, err := anon.BootstrapACL(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Status(ctx); err != nil {
		t.Fatalf("status without a token: %v", err)
	}
	if _, err := anon.NewSession(ctx, 10*time.Second); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("new session without a token: %v, want ErrUnauthorized", err)
	}
	if _, err := anon.Locks(ctx, ""); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("locks without a token: %v, want ErrUnauthorized", err)
	}
	bad, err := client.NewWith([]string{n.Addr}, client.WithToken("not-a-secret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Sessions(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("sessions with a made-up token: %v, want ErrUnauthorized", err)
	}
}

// TestSessionBelongsToItsToken: a second token, with write on the same
// names, can neither keep alive, close, read nor act through the first
// token's session; an admin can; an unknown id is session_not_found.
func TestSessionBelongsToItsToken(t *testing.T) {
	admin, jobs, _ := aclFixture(t)
	ctx := ctxFor(t, 30*time.Second)
	tok2, err := admin.CreateToken(ctx, "jobs-2", client.Rule{Prefix: "jobs/", Access: "write"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := client.NewWith(jobs.Endpoints()[:1], client.WithToken(tok2.Secret))
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, jobs, 10*time.Second)
	if _, err := s.Lock(ctx, "jobs/a"); err != nil {
		t.Fatal(err)
	}
	// Another token's session answers as one that does not exist.
	foreign := other.SessionByID(s.ID())
	if err := foreign.KeepAliveOnce(ctx); !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("keepalive of another token's session: %v, want ErrSessionNotFound", err)
	}
	if err := foreign.Unlock(ctx, "jobs/a"); !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("release through another token's session: %v, want ErrSessionNotFound", err)
	}
	if _, err := foreign.TryLock(ctx, "jobs/b"); !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("acquire through another token's session: %v, want ErrSessionNotFound", err)
	}
	if _, err := other.GetSession(ctx, s.ID()); !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("get another token's session: %v, want ErrSessionNotFound", err)
	}
	// Close is idempotent (a session the cluster says is gone is closed):
	// closing another token's session closes nothing of the owner's.
	if err := foreign.Close(ctx); err != nil {
		t.Errorf("close another token's session: %v, want nil (it is gone as far as this token can tell)", err)
	}
	if err := s.KeepAliveOnce(ctx); err != nil {
		t.Errorf("the owner's session after another token closed it: %v", err)
	}
	if err := other.SessionByID("AAAAAAAAAAAAAAAAAAAAAA").KeepAliveOnce(ctx); !errors.Is(err, client.ErrSessionNotFound) {
		t.Errorf("keepalive of an unknown id: %v, want ErrSessionNotFound", err)
	}
	if ss, err := other.Sessions(ctx); err != nil || len(ss) != 0 {
		t.Errorf("the second token lists %+v, %v; want none of the first's", ss, err)
	}
	if err := admin.SessionByID(s.ID()).KeepAliveOnce(ctx); err != nil {
		t.Errorf("an admin's keepalive of the session: %v", err)
	}
	l, err := jobs.GetLock(ctx, "jobs/a")
	if err != nil || len(l.Holders) != 1 || l.Holders[0].Session != s.ID() || s.Err() != nil {
		t.Fatalf("after the second token's attempts: %+v, %v; session %v", l, err, s.Err())
	}
}

// TestRevokeTellsTheHolder: an admin revokes a held lock; the holder's
// Grant.Lost closes and OnLost runs within a keepalive period or so, and
// the waiter gets the lock.
func TestRevokeTellsTheHolder(t *testing.T) {
	admin, jobs, _ := aclFixture(t)
	ctx := ctxFor(t, 30*time.Second)
	lost := make(chan string, 4)
	holder := newSession(t, jobs, 3*time.Second, client.WithOnLost(func(name string, _ uint64, err error) {
		if errors.Is(err, client.ErrRevoked) {
			lost <- name
		}
	}))
	g, err := holder.Lock(ctx, "jobs/db")
	if err != nil {
		t.Fatal(err)
	}
	waiter := newSession(t, jobs, 10*time.Second)
	ch := goLock(func() (*client.Grant, error) { return waiter.Lock(ctx, "jobs/db") })
	revoked, err := admin.Revoke(ctx, "jobs/db")
	if err != nil || len(revoked) != 1 || revoked[0].Session != holder.ID() || revoked[0].Token != g.Token {
		t.Fatalf("revoke: %+v, %v", revoked, err)
	}
	if r := recvGrant(t, ch, 10*time.Second, "the waiter"); r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	select {
	case <-g.Lost():
		if !errors.Is(g.LostErr(), client.ErrRevoked) {
			t.Fatalf("LostErr %v", g.LostErr())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told it lost the lock")
	}
	if name := <-lost; name != "jobs/db" {
		t.Fatalf("OnLost for %q", name)
	}
	if holder.Err() != nil {
		t.Fatalf("the revoke ended the holder's session: %v", holder.Err())
	}
	if valid, _, err := admin.Check(ctx, "jobs/db", g.Token); err != nil || valid {
		t.Fatalf("check of the revoked token: valid %v, %v", valid, err)
	}
	if err := holder.Unlock(ctx, "jobs/db"); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("unlock of the revoked lock: %v, want ErrNotHeld", err)
	}
	if _, err := jobs.Revoke(ctx, "jobs/db"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("revoke without admin: %v", err)
	}
}

// TestReleasedGrantIsNeverLost: a grant given back is not lost when the
// session ends afterwards.
func TestReleasedGrantIsNeverLost(t *testing.T) {
	_, c := devFixture(t, nil)
	ctx := ctxFor(t, 20*time.Second)
	s := newSession(t, c, 5*time.Second)
	g, err := s.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Lost():
		t.Fatalf("a released grant was lost: %v", g.LostErr())
	default:
	}
	select {
	case <-kept.Lost():
		if !errors.Is(kept.LostErr(), client.ErrSessionClosed) {
			t.Fatalf("LostErr %v", kept.LostErr())
		}
	default:
		t.Fatal("a grant held when the session closed is not lost")
	}
}
