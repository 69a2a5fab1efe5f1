package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
)

// leadershipResult is the outcome of a Campaign run in the background.
type leadershipResult struct {
	l   *client.Leadership
	err error
}

// goCampaign campaigns in the background.
func goCampaign(ctx context.Context, s *client.Session, name, value string, opts ...client.AcquireOption) <-chan leadershipResult {
	ch := make(chan leadershipResult, 1)
	go func() {
		l, err := s.Election(name).Campaign(ctx, value, opts...)
		ch <- leadershipResult{l, err}
	}()
	return ch
}

// recvLeadership waits up to d for a background Campaign's outcome.
func recvLeadership(t *testing.T, ch <-chan leadershipResult, d time.Duration, what string) leadershipResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: not elected within %v", what, d)
	}
	return leadershipResult{}
}

// nextLeader waits up to d for the next leader an Observe channel
// delivers.
func nextLeader(t *testing.T, ch <-chan client.ElectionLeader, d time.Duration, what string) client.ElectionLeader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the observe channel closed", what)
		}
		return l
	case <-time.After(d):
		t.Fatalf("%s: nothing observed within %v", what, d)
	}
	return client.ElectionLeader{}
}

// wantLeader checks that l is the leader with value and token.
func wantLeader(t *testing.T, l client.ElectionLeader, value string, token uint64, what string) {
	t.Helper()
	if l.Value != value || l.Token != token {
		t.Fatalf("%s: leader %q with token %d, want %q with token %d", what, l.Value, l.Token, value, token)
	}
}

// queued waits until name has n waiters.
func queued(t *testing.T, ctx context.Context, c *client.Client, name string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d candidates queued on %s", n, name), func() (bool, string) {
		ids, err := waiters(ctx, c, name)
		return err == nil && len(ids) == n, fmt.Sprint(ids, err)
	})
}

// Two candidates campaign: the first leads, the second queues. An
// observer sees the first, its proclaimed value under the same token,
// and the second, with a larger token, once the first resigns; then
// nobody, and the first again, with a larger token still, when it wins
// the name back after the second's session closes.
func TestElectionCampaignProclaimResignObserve(t *testing.T) {
	_, c := devFixture(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	const name = "svc/scheduler"
	obs := c.Election(name)
	if l, err := obs.Leader(ctx); !errors.Is(err, client.ErrElectionNoLeader) {
		t.Fatalf("leader of an unused name: %+v, %v; want ErrElectionNoLeader", l, err)
	}
	if _, err := obs.Campaign(ctx, "x"); !errors.Is(err, client.ErrObserver) {
		t.Fatalf("an observer's campaign: %v, want ErrObserver", err)
	}
	leaders := obs.Observe(ctx)

	a, b := newSession(t, c, 10*time.Second), newSession(t, c, 10*time.Second)
	la, err := a.Election(name).Campaign(ctx, "10.0.0.7:8080")
	if err != nil {
		t.Fatal(err)
	}
	if la.Name != name || la.Token == 0 || la.Value() != "10.0.0.7:8080" {
		t.Fatalf("leadership %+v value %q", la, la.Value())
	}
	bch := goCampaign(ctx, b, name, "10.0.0.8:8080")
	queued(t, ctx, c, name, 1)
	wantLeader(t, nextLeader(t, leaders, 10*time.Second, "the first leader"), "10.0.0.7:8080", la.Token, "observed first")
	if l, err := obs.Leader(ctx); err != nil || l.Value != "10.0.0.7:8080" || l.Token != la.Token || l.Since.IsZero() {
		t.Fatalf("Leader: %+v, %v", l, err)
	}

	if err := la.Proclaim(ctx, "10.0.0.7:9090"); err != nil || la.Value() != "10.0.0.7:9090" {
		t.Fatalf("proclaim: %v, value %q", err, la.Value())
	}
	wantLeader(t, nextLeader(t, leaders, 10*time.Second, "the proclaim"), "10.0.0.7:9090", la.Token, "observed after the proclaim")

	if err := la.Resign(ctx); err != nil {
		t.Fatalf("resign: %v", err)
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatalf("resign again: %v", err)
	}
	r := recvLeadership(t, bch, 10*time.Second, "the second candidate")
	if r.err != nil || r.l.Token <= la.Token {
		t.Fatalf("second candidate: %+v, %v; want a token above %d", r.l, r.err, la.Token)
	}
	lb := r.l
	wantLeader(t, nextLeader(t, leaders, 10*time.Second, "the second leader"), "10.0.0.8:8080", lb.Token, "observed after the resign")
	if err := la.Proclaim(ctx, "10.0.0.7:1"); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("proclaim after resigning: %v, want ErrNotHeld", err)
	}
	select {
	case <-la.Lost():
		t.Fatalf("a resigned leadership is lost: %v", la.LostErr())
	default:
	}

	// The second's session closes: nobody leads (not delivered), until
	// the first campaigns again.
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-lb.Lost()
	if !errors.Is(lb.LostErr(), client.ErrSessionClosed) {
		t.Fatalf("LostErr after Close: %v", lb.LostErr())
	}
	if l, err := obs.Leader(ctx); !errors.Is(err, client.ErrElectionNoLeader) {
		t.Fatalf("leader after the leader's session closed: %+v, %v", l, err)
	}
	la2, err := a.Election(name).Campaign(ctx, "10.0.0.7:7070", client.Wait(0))
	if err != nil || la2.Token <= lb.Token {
		t.Fatalf("campaign again: %+v, %v; want a token above %d", la2, err, lb.Token)
	}
	wantLeader(t, nextLeader(t, leaders, 10*time.Second, "the first again"), "10.0.0.7:7070", la2.Token, "observed after the new term")
}

// A candidate that gives up (its ctx ends) leaves the queue; one that only
// tries (Wait(0)) is refused while someone leads.
func TestElectionCampaignGivesUp(t *testing.T) {
	_, c := devFixture(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	const name = "svc/giveup"
	a, b := newSession(t, c, 10*time.Second), newSession(t, c, 10*time.Second)
	if _, err := a.Election(name).Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Election(name).Campaign(ctx, "b", client.Wait(0)); !errors.Is(err, client.ErrLocked) {
		t.Fatalf("Wait(0) while a leads: %v, want ErrLocked", err)
	}
	bctx, cancel := context.WithCancel(ctx)
	bch := goCampaign(bctx, b, name, "b")
	queued(t, ctx, c, name, 1)
	cancel()
	if r := recvLeadership(t, bch, 10*time.Second, "the cancelled candidate"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled campaign: %+v, %v", r.l, r.err)
	}
	queued(t, ctx, c, name, 0)
	if l, err := c.Election(name).Leader(ctx); err != nil || l.Value != "a" {
		t.Fatalf("leader: %+v, %v", l, err)
	}
}

// An operator revokes the leader's hold and the session wins the name
// again: the old leadership's Proclaim names its token and is refused
// (ErrNotHeld), which closes its Lost, while the new term is untouched. A
// value over 4096 bytes is refused and changes nothing.
func TestElectionProclaimAfterRevoke(t *testing.T) {
	_, c := devFixture(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	const name = "svc/revoked"
	// A long TTL: the keepalive that would report the revocation comes
	// long after the proclaim, which must learn it from the cluster.
	s := newSession(t, c, 30*time.Second)
	e := s.Election(name)
	l1, err := e.Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if revoked, err := c.Revoke(ctx, name); err != nil || len(revoked) != 1 || revoked[0].Token != l1.Token {
		t.Fatalf("revoke: %+v, %v", revoked, err)
	}
	l2, err := e.Campaign(ctx, "v2")
	if err != nil || l2.Token <= l1.Token {
		t.Fatalf("campaign after the revoke: %+v, %v", l2, err)
	}
	if err := l1.Proclaim(ctx, "stale"); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("proclaim of the revoked term: %v, want ErrNotHeld", err)
	}
	select {
	case <-l1.Lost():
		if !errors.Is(l1.LostErr(), client.ErrNotHeld) && !errors.Is(l1.LostErr(), client.ErrRevoked) {
			t.Fatalf("LostErr %v", l1.LostErr())
		}
	default:
		t.Fatal("a refused proclaim did not close Lost")
	}
	if err := l1.Resign(ctx); err != nil {
		t.Fatalf("resign of a lost leadership: %v", err)
	}
	if l, err := e.Leader(ctx); err != nil || l.Value != "v2" || l.Token != l2.Token {
		t.Fatalf("leader after the stale proclaim: %+v, %v", l, err)
	}
	if l2.LostErr() != nil {
		t.Fatalf("the new term was lost with the old: %v", l2.LostErr())
	}
	if err := l2.Proclaim(ctx, strings.Repeat("x", 5000)); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("5000-byte value: %v, want ErrInvalidRequest", err)
	}
	if err := l2.Proclaim(ctx, "v3"); err != nil {
		t.Fatal(err)
	}
	if l, err := e.Leader(ctx); err != nil || l.Value != "v3" || l.Token != l2.Token || l2.Value() != "v3" {
		t.Fatalf("leader after proclaiming v3: %+v, %v (Value %q)", l, err, l2.Value())
	}
	// The session holds the name once: the revoked hold does not count.
	if err := l2.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := e.Leader(ctx); !errors.Is(err, client.ErrElectionNoLeader) {
		t.Fatalf("leader after resigning: %+v, %v", l, err)
	}
}

// With ACLs, an observer with a read token sees the leader's value (the
// session stays redacted); a name outside its rules is refused, and
// Observe's channel closes rather than retrying a refusal.
func TestElectionObserverWithReadToken(t *testing.T) {
	admin, jobs, _ := aclFixture(t)
	ctx := ctxFor(t, 30*time.Second)
	tok, err := admin.CreateToken(ctx, "reader", client.Rule{Prefix: "jobs/", Access: "read"})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := client.NewWith(admin.Endpoints(), client.WithToken(tok.Secret))
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, jobs, 10*time.Second)
	l, err := s.Election("jobs/leader").Campaign(ctx, "10.0.0.9:80")
	if err != nil {
		t.Fatal(err)
	}
	got, err := reader.Election("jobs/leader").Leader(ctx)
	if err != nil || got.Value != "10.0.0.9:80" || got.Token != l.Token {
		t.Fatalf("leader as the reader sees it: %+v, %v", got, err)
	}
	if _, err := reader.Election("other/leader").Leader(ctx); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("leader outside the reader's rules: %v, want ErrForbidden", err)
	}
	select {
	case l, ok := <-reader.Election("other/leader").Observe(ctx):
		if ok {
			t.Fatalf("observed %+v outside the reader's rules", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Observe of a forbidden name did not close its channel")
	}
}
