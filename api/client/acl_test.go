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
}

// TestRevokeTellsTheHolder: an admin revokes a held lock; the holder's
// Grant.Lost closes and OnLost runs within a keepalive period or so, and
// the waiter gets the lock.
func TestRevokeTellsTheHolder(t *testing.T) {
	admin, jobs, _ := aclFixture(t)
	ctx := ctxFor(t, 30*time.Second)
	lost := make(chan string, 1)
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
