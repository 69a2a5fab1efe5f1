package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
)

// A session made with CreateSession is not kept alive: it expires after
// its TTL, with its name and TTL as asked.
func TestCreateSessionIsNotKeptAlive(t *testing.T) {
	t.Parallel() // mostly waiting: overlap with the others
	_, c := devFixture(t, nil)
	info, err := c.CreateSession(ctxFor(t, 5*time.Second), time.Second, client.WithSessionName("no-keepalives"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "no-keepalives" || time.Duration(info.TTL) != time.Second || info.ID == "" {
		t.Fatalf("created %+v", info)
	}
	eventually(t, 10*time.Second, "the session expires", func() (bool, string) {
		_, err := c.GetSession(ctxFor(t, 5*time.Second), info.ID)
		return errors.Is(err, client.ErrSessionNotFound), errString(err)
	})
}

// Unlock and DeleteSession act on a session by its id: one hold of a
// reentrant lock, then the whole session with what it holds.
func TestUnlockAndDeleteByID(t *testing.T) {
	_, c := devFixture(t, nil)
	ctx := ctxFor(t, 20*time.Second)
	s := newSession(t, c, 10*time.Second)
	for range 2 {
		if _, err := s.Lock(ctx, "byid/x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Unlock(ctx, s.ID(), "byid/x"); err != nil {
		t.Fatal(err)
	}
	info, err := c.GetSession(ctx, s.ID())
	if err != nil || len(info.Held) != 1 || info.Held[0].Count != 1 {
		t.Fatalf("after one unlock of two holds: %+v, %v", info, err)
	}
	if err := c.Unlock(ctx, s.ID(), "byid/other"); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("unlock of a name not held: %v, want ErrNotHeld", err)
	}
	closed, err := c.DeleteSession(ctx, s.ID())
	if err != nil || closed.ID != s.ID() || len(closed.Released) != 1 || closed.Released[0].Name != "byid/x" {
		t.Fatalf("delete: %+v, %v", closed, err)
	}
	if _, err := c.DeleteSession(ctx, s.ID()); !errors.Is(err, client.ErrSessionNotFound) {
		t.Fatalf("second delete: %v, want ErrSessionNotFound", err)
	}
	if err := c.Unlock(ctx, s.ID(), "byid/x"); !errors.Is(err, client.ErrSessionNotFound) {
		t.Fatalf("unlock by a deleted session: %v, want ErrSessionNotFound", err)
	}
}

// WatchLock reads a free name at once (no error, its version), then
// blocks until the name changes and returns it with a newer version, and
// sees it free again after the release.
func TestWatchLock(t *testing.T) {
	_, c := devFixture(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	info, v0, err := c.WatchLock(ctx, "watch/x", 0, 0)
	if err != nil || info != nil {
		t.Fatalf("first read of a free name: %+v, %v", info, err)
	}
	type answer struct {
		info *client.LockInfo
		v    uint64
		err  error
	}
	watch := func(index uint64) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			info, v, err := c.WatchLock(ctx, "watch/x", index, 20*time.Second)
			ch <- answer{info, v, err}
		}()
		return ch
	}
	ch := watch(v0)
	s := newSession(t, c, 10*time.Second)
	g, err := s.Lock(ctx, "watch/x")
	if err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a.err != nil || a.v <= v0 || a.info == nil || len(a.info.Holders) != 1 || a.info.Holders[0].Token != g.Token {
		t.Fatalf("watch from %d: %+v at %d, %v; want the holder", v0, a.info, a.v, a.err)
	}
	ch = watch(a.v)
	if err := s.Unlock(ctx, "watch/x"); err != nil {
		t.Fatal(err)
	}
	if b := <-ch; b.err != nil || b.info != nil || b.v <= a.v {
		t.Fatalf("watch from %d after the release: %+v at %d, %v; want it free at a newer version", a.v, b.info, b.v, b.err)
	}
}
