package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/client"
)

// devFixture starts an in-process dev node and a client of it.
func devFixture(t *testing.T, tweak func(*api.Config)) (*devNode, *client.Client) {
	t.Helper()
	n, err := startDevNode(tweak)
	if err != nil {
		t.Fatalf("dev node: %v", err)
	}
	t.Cleanup(n.Stop)
	c, err := client.New(n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return n, c
}

// ctxFor is the test context bounded by d.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// newSession creates a session closed at cleanup.
func newSession(t *testing.T, c *client.Client, ttl time.Duration, opts ...client.SessionOption) *client.Session {
	t.Helper()
	s, err := c.NewSession(ctxFor(t, 20*time.Second), ttl, opts...)
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// eventually polls cond every 20ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, d, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// asyncGrant runs an acquire in the background.
type grantResult struct {
	g   *client.Grant
	err error
}

func goLock(f func() (*client.Grant, error)) <-chan grantResult {
	ch := make(chan grantResult, 1)
	go func() {
		g, err := f()
		ch <- grantResult{g, err}
	}()
	return ch
}

func recvGrant(t *testing.T, ch <-chan grantResult, d time.Duration, what string) grantResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no answer within %v", what, d)
	}
	return grantResult{}
}

// waiters returns the request ids waiting on name (none when the name is
// not in use).
func waiters(ctx context.Context, c *client.Client, name string) ([]string, error) {
	l, err := c.GetLock(ctx, name)
	if err != nil {
		if errorsIs(err, client.ErrLockNotFound) {
			return nil, nil
		}
		return nil, err
	}
	var ids []string
	for _, w := range l.Waiters {
		ids = append(ids, w.RequestID)
	}
	return ids, nil
}
