package certs

import (
	"crypto/tls"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeAll writes a CA certificate and a key pair into a new directory.
func writeAll(t *testing.T, ca *Authority, name string, certPEM, keyPEM []byte) Files {
	t.Helper()
	dir := t.TempDir()
	if err := WriteKeyPair(dir, name, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	f := Files{CA: filepath.Join(dir, "ca.pem")}
	f.Cert, f.Key = pairPaths(dir, name)
	if err := os.WriteFile(f.CA, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// nodeFiles issues a node certificate for name and writes it.
func nodeFiles(t *testing.T, ca *Authority, name string) Files {
	t.Helper()
	certPEM, keyPEM, err := ca.Node(name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return writeAll(t, ca, name, certPEM, keyPEM)
}

func load(t *testing.T, f Files) *Store {
	t.Helper()
	s, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// apiClient is a Go client's config that trusts ca and presents a client
// certificate of issuer named name, or none if issuer is nil.
func apiClient(t *testing.T, ca, issuer *Authority, name string) *tls.Config {
	t.Helper()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	var f Files
	if issuer != nil {
		certPEM, keyPEM, err := issuer.Client(name)
		if err != nil {
			t.Fatal(err)
		}
		f = writeAll(t, issuer, name, certPEM, keyPEM)
	}
	c, err := ClientConfig(caFile, f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// connect makes one TLS connection over loopback and has the server send
// a byte, so that a refusal by either end shows: in TLS 1.3 the client's
// handshake is over before the server has looked at its certificate.
func connect(t *testing.T, server, client *tls.Config) (serverSaw, clientSaw tls.ConnectionState, err error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		cs  tls.ConnectionState
		err error
	}
	served := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- result{err: err}
			return
		}
		defer conn.Close()
		tc := conn.(*tls.Conn)
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			served <- result{err: err}
			return
		}
		_, err = tc.Write([]byte{1})
		served <- result{tc.ConnectionState(), err}
	}()
	conn, cerr := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), client)
	if cerr == nil {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, cerr = io.ReadFull(conn, make([]byte, 1))
		clientSaw = conn.ConnectionState()
		conn.Close()
	}
	r := <-served
	return r.cs, clientSaw, errors.Join(r.err, cerr)
}

func TestHandshakes(t *testing.T) {
	ca, other := newAuthority(t), newAuthority(t)
	n1, n2 := load(t, nodeFiles(t, ca, "n1")), load(t, nodeFiles(t, ca, "n2"))
	stranger := load(t, nodeFiles(t, other, "n3"))

	n2Files := nodeFiles(t, ca, "n2")
	nodeAsClient, err := ClientConfig(n2Files.CA, n2Files.Cert, n2Files.Key)
	if err != nil {
		t.Fatal(err)
	}
	old := apiClient(t, ca, nil, "")
	old.MaxVersion = tls.VersionTLS12
	// A server presenting a client certificate (which Load would refuse).
	clientCertServer := func() *tls.Config {
		certPEM, keyPEM, _ := ca.Client("n9")
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}}
	}()

	for _, tc := range []struct {
		name                 string
		server, client       *tls.Config
		ok                   bool
		serverSaw, clientSaw string // PeerName on either end
	}{
		{"peers: node to node", n1.PeerServer(), n2.PeerClient(), true, "n2", "n1"},
		{"peers: a client certificate is refused", n1.PeerServer(), apiClient(t, ca, ca, "ops"), false, "", ""},
		{"peers: no certificate is refused", n1.PeerServer(), apiClient(t, ca, nil, ""), false, "", ""},
		{"peers: a node of another CA is refused", n1.PeerServer(), stranger.PeerClient(), false, "", ""},
		{"peers: a server of another CA is refused", stranger.PeerServer(), n1.PeerClient(), false, "", ""},
		{"peers: a server with a client certificate is refused", clientCertServer, n1.PeerClient(), false, "", ""},
		{"api: no client certificate asked", n1.APIServer(false), apiClient(t, ca, nil, ""), true, "", "n1"},
		{"api: a client certificate is required", n1.APIServer(true), apiClient(t, ca, nil, ""), false, "", ""},
		{"api: a client certificate is accepted", n1.APIServer(true), apiClient(t, ca, ca, "ops"), true, "ops", "n1"},
		{"api: a node certificate is accepted", n1.APIServer(true), nodeAsClient, true, "n2", "n1"},
		{"api: a client of another CA is refused", n1.APIServer(true), apiClient(t, ca, other, "ops"), false, "", ""},
		{"api: a server of another CA is refused", stranger.APIServer(false), apiClient(t, ca, nil, ""), false, "", ""},
		{"api: TLS 1.2 is refused", n1.APIServer(false), old, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serverSaw, clientSaw, err := connect(t, tc.server, tc.client)
			if ok := err == nil; ok != tc.ok {
				t.Fatalf("connected: %v (%v), want %v", ok, err, tc.ok)
			}
			if !tc.ok {
				t.Logf("refused: %v", err)
				return
			}
			if serverSaw.Version != tls.VersionTLS13 {
				t.Errorf("version %x, want TLS 1.3", serverSaw.Version)
			}
			if got := PeerName(serverSaw); got != tc.serverSaw {
				t.Errorf("server saw %q, want %q", got, tc.serverSaw)
			}
			if got := PeerName(clientSaw); got != tc.clientSaw {
				t.Errorf("client saw %q, want %q", got, tc.clientSaw)
			}
		})
	}
}

func TestLoadAndReload(t *testing.T) {
	ca, other := newAuthority(t), newAuthority(t)
	files := nodeFiles(t, ca, "n1")
	s := load(t, files)
	peer := load(t, nodeFiles(t, ca, "n2"))
	server := s.PeerServer() // built once: Reload must reach it anyway
	serial := func() *big.Int {
		t.Helper()
		_, clientSaw, err := connect(t, server, peer.PeerClient())
		if err != nil {
			t.Fatal(err)
		}
		return clientSaw.PeerCertificates[0].SerialNumber
	}
	first := serial()

	certPEM, keyPEM, _ := ca.Node("n1", nil, nil)
	os.WriteFile(files.Cert, certPEM, 0o644)
	os.WriteFile(files.Key, keyPEM, 0o600)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	second := serial()
	if second.Cmp(first) == 0 || second.Cmp(parseOne(t, certPEM).SerialNumber) != 0 {
		t.Fatalf("after Reload the server presents serial %v, want the new %v", second, parseOne(t, certPEM).SerialNumber)
	}

	clientPEM, clientKey, _ := ca.Client("n1")
	foreignPEM, foreignKey, _ := other.Node("n1", nil, nil)
	otherPEM, _, _ := ca.Node("n1", nil, nil)
	for _, bad := range []struct {
		name     string
		cert, ky []byte
	}{
		{"not PEM", []byte("garbage"), keyPEM},
		{"empty key", certPEM, nil},
		{"key of another certificate", otherPEM, keyPEM},
		{"client certificate", clientPEM, clientKey},
		{"node of another CA", foreignPEM, foreignKey},
	} {
		t.Run(bad.name, func(t *testing.T) {
			os.WriteFile(files.Cert, bad.cert, 0o644)
			os.WriteFile(files.Key, bad.ky, 0o600)
			if _, err := Load(files); err == nil {
				t.Error("Load accepted it")
			}
			err := s.Reload()
			if err == nil {
				t.Fatal("Reload accepted it")
			}
			t.Logf("Reload: %v", err)
			if got := serial(); got.Cmp(second) != 0 || s.NodeID() != "n1" {
				t.Errorf("after a failed Reload: serial %v, node %q; want the old %v, n1", got, s.NodeID(), second)
			}
		})
	}
	if _, err := Load(Files{CA: files.CA, Cert: files.Cert}); err == nil {
		t.Error("Load without a key file")
	}
}

func TestClientConfigErrors(t *testing.T) {
	f := nodeFiles(t, newAuthority(t), "n1")
	for name, args := range map[string][3]string{
		"missing CA file":    {filepath.Join(t.TempDir(), "none.pem"), "", ""},
		"CA file is a key":   {f.Key, "", ""},
		"certificate alone":  {f.CA, f.Cert, ""},
		"key alone":          {f.CA, "", f.Key},
		"key and key":        {f.CA, f.Key, f.Key},
		"missing cert files": {f.CA, f.Cert + ".none", f.Key},
	} {
		if _, err := ClientConfig(args[0], args[1], args[2]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if c, err := ClientConfig("", f.Cert, f.Key); err != nil || c.RootCAs != nil || len(c.Certificates) != 1 {
		t.Errorf("system roots and a certificate: %+v, %v", c, err)
	}
}
