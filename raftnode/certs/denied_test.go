package certs

import (
	"crypto/tls"
	"math/big"
	"sync"
	"testing"
)

// denyList is a deny list for tests: the serials it holds.
type denyList struct {
	mu      sync.Mutex
	serials map[string]bool
}

func (d *denyList) deny(s *big.Int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.serials[s.Text(16)] = true
}

func (d *denyList) denied(s *big.Int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.serials[s.Text(16)]
}

// serialOf is the serial of the certificate a config presents.
func serialOf(t *testing.T, server, client *tls.Config) (serverSerial, clientSerial *big.Int) {
	t.Helper()
	serverSaw, clientSaw, err := connect(t, server, client)
	if err != nil {
		t.Fatal(err)
	}
	return clientSaw.PeerCertificates[0].SerialNumber, serverSaw.PeerCertificates[0].SerialNumber
}

// Every config of a Store refuses a certificate on its deny list at the
// handshake, on either end, and keeps refusing it after a Reload; other
// certificates of the same CA, and a store without a list, still connect.
func TestDeniedCertificates(t *testing.T) {
	ca := newAuthority(t)
	files := nodeFiles(t, ca, "n1")
	n1, n2 := load(t, files), load(t, nodeFiles(t, ca, "n2"))
	n3 := load(t, nodeFiles(t, ca, "n3"))
	ops := apiClient(t, ca, ca, "ops")
	n1Serial, n2Serial := serialOf(t, n1.PeerServer(), n2.PeerClient())
	_, opsSerial := serialOf(t, n1.APIServer(true), ops)

	list := &denyList{serials: map[string]bool{}}
	n1.SetDenied(list.denied)
	n2.SetDenied(list.denied)
	list.deny(n2Serial)
	list.deny(opsSerial)
	check := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			name           string
			server, client *tls.Config
			ok             bool
		}{
			{"node port: a denied node is refused", n1.PeerServer(), n2.PeerClient(), false},
			{"node port: a server without the list lets a denied node in", n3.PeerServer(), n2.PeerClient(), true},
			{"node port: dialing a denied node is refused", n2.PeerServer(), n1.PeerClient(), false},
			{"node port: another node gets in", n1.PeerServer(), n3.PeerClient(), true},
			{"api: a denied client is refused", n1.APIServer(false), ops, false},
			{"api: a denied client is refused with client auth", n1.APIServer(true), ops, false},
			{"api: another client gets in", n1.APIServer(true), apiClient(t, ca, ca, "ops2"), true},
			{"api: no certificate, none asked", n1.APIServer(false), apiClient(t, ca, nil, ""), true},
		} {
			if _, _, err := connect(t, tc.server, tc.client); (err == nil) != tc.ok {
				t.Errorf("%s, %s: connected %v (%v), want %v", when, tc.name, err == nil, err, tc.ok)
			}
		}
	}
	check("before a reload")
	if err := n1.Reload(); err != nil {
		t.Fatal(err)
	}
	check("after a reload")
	list.deny(n1Serial) // n1's own certificate: n3 (no list) still talks to it
	if _, _, err := connect(t, n1.PeerServer(), n3.PeerClient()); err != nil {
		t.Fatalf("a store without a deny list: %v", err)
	}
	n1.SetDenied(nil)
	if _, _, err := connect(t, n1.PeerServer(), n2.PeerClient()); err == nil {
		t.Fatal("n2, whose own list denies n1's certificate, dialed n1")
	}
}
