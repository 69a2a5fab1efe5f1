package client_test

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/client/clienttest"
)

// statusServer is an HTTPS node that requires client certificates and
// answers /v1/status naming as leader the same node under another name,
// localhost instead of 127.0.0.1, and as node id the host it was asked by:
// a client that learned the leader reports node id "localhost:PORT".
func statusServer(t *testing.T) (addr string, f clienttest.TLSFiles) {
	srv, f := clienttest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, port, _ := net.SplitHostPort(r.Host)
		leader := net.JoinHostPort("localhost", port)
		st := client.Status{NodeID: r.Host, State: "leader", Leader: client.Leader{ID: leader, HTTPAddr: leader},
			Members: []client.Member{{ID: leader, HTTPAddr: leader, Voter: true}}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	}), true)
	return srv.Listener.Addr().String(), f
}

// tlsClient is a client of addr with the TLS config of the three files.
func tlsClient(t *testing.T, addr, ca, cert, key string) *client.Client {
	t.Helper()
	cfg, err := client.TLSConfig(ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWith([]string{addr}, client.WithTLS(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// With the CA and a client certificate every call, to the configured
// endpoint and to the leader learned from /v1/status, is HTTPS.
func TestTLSLearnsHTTPSLeader(t *testing.T) {
	addr, f := statusServer(t)
	for name, c := range map[string]*client.Client{
		"client certificate": tlsClient(t, addr, f.CA, f.Cert, f.Key),
		"node certificate":   tlsClient(t, addr, f.CA, f.NodeCert, f.NodeKey),
	} {
		t.Run(name, func(t *testing.T) {
			st, err := c.Status(ctxFor(t, 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(addr)
			leader := "https://localhost:" + port
			if c.Leader() != leader || st.NodeID != "localhost:"+port {
				t.Fatalf("leader %q, answered by %q; want %s", c.Leader(), st.NodeID, leader)
			}
			for _, e := range c.Endpoints() {
				if !strings.HasPrefix(e, "https://") {
					t.Fatalf("endpoint %s in %v is not https", e, c.Endpoints())
				}
			}
		})
	}
}

// A handshake that fails for good fails the call at once, as the
// matching error, instead of being retried for RetryPolicy.MaxElapsed.
func TestTLSRefused(t *testing.T) {
	addr, f := statusServer(t)
	plain, err := client.NewWith([]string{addr}, client.WithTLS(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    *client.Client
		is   func(error) bool
	}{
		{"no client certificate", tlsClient(t, addr, f.CA, "", ""), func(err error) bool {
			return strings.Contains(err.Error(), "tls: certificate required")
		}},
		{"no CA", tlsClient(t, addr, "", f.Cert, f.Key), func(err error) bool {
			var verr *tls.CertificateVerificationError
			return errors.As(err, &verr)
		}},
		{"plain http", plain, func(err error) bool {
			return errors.Is(err, client.ErrHTTPSRequired) && strings.Contains(err.Error(), client.EnvCACert)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := tc.c.Status(ctxFor(t, 20*time.Second))
			if err == nil || !tc.is(err) {
				t.Fatalf("got %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("failed after %v: retried", d)
			}
		})
	}
}

// The environment switches TLS on for New; WithTLS(nil) switches it off.
func TestTLSFromEnv(t *testing.T) {
	addr, f := statusServer(t)
	t.Setenv(client.EnvCACert, f.CA)
	t.Setenv(client.EnvClientCert, f.Cert)
	t.Setenv(client.EnvClientKey, f.Key)
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Endpoints(); len(got) != 1 || got[0] != "https://"+addr {
		t.Fatalf("endpoints %v, want https://%s", got, addr)
	}
	if _, err := c.Status(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	c, err = client.NewWith([]string{addr}, client.WithTLS(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Endpoints(); got[0] != "http://"+addr {
		t.Fatalf("WithTLS(nil): endpoints %v", got)
	}
	t.Setenv(client.EnvClientKey, "")
	if _, err := client.New(addr); err == nil {
		t.Fatalf("%s without %s: want an error", client.EnvClientCert, client.EnvClientKey)
	}
}

// A dev node's API behind TLS with client certificates required: a
// session locks and unlocks over HTTPS.
func TestTLSDevNode(t *testing.T) {
	var node atomic.Pointer[api.Server]
	srv, f := clienttest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := node.Load(); s != nil {
			s.ServeHTTP(w, r)
			return
		}
		http.Error(w, `{"error":{"code":"no_leader","message":"starting"}}`, http.StatusServiceUnavailable)
	}), true)
	addr := srv.Listener.Addr().String()
	n, _ := devFixture(t, func(cfg *api.Config) { cfg.HTTPAddr, cfg.PeerHTTP = addr, nil })
	node.Store(n.srv)

	c := tlsClient(t, addr, f.CA, f.Cert, f.Key)
	s := newSession(t, c, 5*time.Second)
	g, err := s.Lock(ctxFor(t, 10*time.Second), "tls/x")
	if err != nil {
		t.Fatal(err)
	}
	if valid, _, err := c.Check(ctxFor(t, 5*time.Second), "tls/x", g.Token); err != nil || !valid {
		t.Fatalf("check: valid %v, %v", valid, err)
	}
	if err := s.Unlock(ctxFor(t, 5*time.Second), "tls/x"); err != nil {
		t.Fatal(err)
	}
	if c.Leader() != "https://"+addr {
		t.Fatalf("leader %q, want https://%s", c.Leader(), addr)
	}
}
