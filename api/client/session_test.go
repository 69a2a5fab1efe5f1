package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
)

var errorsIs = errors.Is

func TestNewFromEnv(t *testing.T) {
	t.Setenv(client.EnvAddr, " 127.0.0.1:1 , http://127.0.0.1:2/")
	c, err := client.New()
	if err != nil {
		t.Fatal(err)
	}
	got := c.Endpoints()
	if len(got) != 2 || got[0] != "http://127.0.0.1:1" || got[1] != "http://127.0.0.1:2" {
		t.Fatalf("endpoints %v", got)
	}
	t.Setenv(client.EnvAddr, "")
	if _, err := client.New(); err == nil {
		t.Fatal("New with no endpoints and empty LOCKD_ADDR: want an error")
	}
}

// Keepalives every TTL/3 keep a 1s session alive for 5 TTLs.
func TestKeepaliveKeepsSessionAlive(t *testing.T) {
	t.Parallel() // mostly waiting: overlap with the others
	_, c := devFixture(t, nil)
	s := newSession(t, c, time.Second)
	g, err := s.Lock(ctxFor(t, 5*time.Second), "ka/x")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
		t.Fatalf("session lost: %v", s.Err())
	case <-time.After(5 * time.Second):
	}
	info, err := c.GetSession(ctxFor(t, 5*time.Second), s.ID())
	if err != nil {
		t.Fatalf("session after 5 TTLs: %v", err)
	}
	if len(info.Held) != 1 || info.Held[0].Token != g.Token {
		t.Fatalf("held %+v, want ka/x with token %d", info.Held, g.Token)
	}
	if s.Err() != nil {
		t.Fatalf("Err = %v while alive", s.Err())
	}
}

// With keepalives held back, the server expires the session; the next
// keepalive hears session_not_found and Done closes.
func TestDoneWhenServerExpiresSession(t *testing.T) {
	t.Parallel() // mostly waiting: overlap with the others
	_, c := devFixture(t, nil)
	s := newSession(t, c, time.Second)
	if _, err := s.Lock(ctxFor(t, 5*time.Second), "exp/x"); err != nil {
		t.Fatal(err)
	}
	s.PauseKeepalives(2500 * time.Millisecond)
	// The server expires it ~1s after the last keepalive.
	eventually(t, 5*time.Second, "server expires the session", func() (bool, string) {
		_, err := c.GetSession(ctxFor(t, 5*time.Second), s.ID())
		return errors.Is(err, client.ErrSessionNotFound), "GetSession: " + errString(err)
	})
	select {
	case <-s.Done():
		t.Fatalf("Done closed before the client heard of the expiry: %v", s.Err())
	default:
	}
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the server expired the session")
	}
	if !errors.Is(s.Err(), client.ErrSessionNotFound) {
		t.Fatalf("Err = %v, want ErrSessionNotFound", s.Err())
	}
	if _, err := s.Lock(ctxFor(t, 5*time.Second), "exp/y"); !errors.Is(err, client.ErrSessionNotFound) {
		t.Fatalf("Lock on a lost session: %v, want ErrSessionNotFound", err)
	}
}

// Close deletes the session and closes Done with ErrSessionClosed.
func TestCloseReleases(t *testing.T) {
	_, c := devFixture(t, nil)
	s := newSession(t, c, 5*time.Second)
	if _, err := s.Lock(ctxFor(t, 5*time.Second), "close/x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if !errors.Is(s.Err(), client.ErrSessionClosed) {
		t.Fatalf("Err = %v", s.Err())
	}
	if _, err := c.GetLock(ctxFor(t, 5*time.Second), "close/x"); !errors.Is(err, client.ErrLockNotFound) {
		t.Fatalf("lock after Close: %v, want lock_not_found", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
