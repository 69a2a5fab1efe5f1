// Package clienttest serves HTTPS as a lockd node with TLS does, for tests
// of programs built on package client: a new certificate authority, a node
// certificate for the server and a client certificate, in PEM files in the
// test's temporary directory.
package clienttest

import (
	"crypto/tls"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockd/lockd/raftnode/certs"
)

// TLSFiles are the PEM files a client of a TLS server needs.
type TLSFiles struct {
	CA   string // the CA certificate
	Cert string // a client certificate the CA signed
	Key  string // its key
	// NodeCert and NodeKey are the server's node certificate and key,
	// which also serve as a client certificate.
	NodeCert, NodeKey string
}

// NewTLSServer starts an HTTPS server of h on 127.0.0.1 with the TLS
// config of a lockd node's HTTP API; with requireClientCert clients must
// present a certificate the CA signed, as with --tls-client-auth. The
// server is closed when t ends.
func NewTLSServer(t testing.TB, h http.Handler, requireClientCert bool) (*httptest.Server, TLSFiles) {
	t.Helper()
	return NewTLSServerDenying(t, h, requireClientCert, nil)
}

// NewTLSServerDenying is NewTLSServer whose TLS config also refuses, at
// the handshake, a client certificate whose serial denied reports, as a
// node's does with the cluster's deny list (certs.Store.SetDenied); nil
// denies nothing.
func NewTLSServerDenying(t testing.TB, h http.Handler, requireClientCert bool, denied func(serial *big.Int) bool) (*httptest.Server, TLSFiles) {
	t.Helper()
	f := writeFiles(t)
	store, err := certs.Load(certs.Files{CA: f.CA, Cert: f.NodeCert, Key: f.NodeKey})
	if err != nil {
		t.Fatal(err)
	}
	store.SetDenied(denied)
	leaf, err := tls.LoadX509KeyPair(f.NodeCert, f.NodeKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what tests check
	srv.TLS = store.APIServer(requireClientCert)
	// Without Certificates StartTLS adds httptest's own, which crypto/tls
	// prefers to GetCertificate when the client sends no server name (as
	// when dialing an IP address).
	srv.TLS.Certificates = []tls.Certificate{leaf}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, f
}

// writeFiles makes a new CA and writes it, a node certificate for
// 127.0.0.1 and a client certificate to t.TempDir().
func writeFiles(t testing.TB) TLSFiles {
	t.Helper()
	ca, err := certs.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, nodeKey, err := ca.Node("node", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey, err := ca.Client("client")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := TLSFiles{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem"),
		NodeCert: filepath.Join(dir, "node.pem"), NodeKey: filepath.Join(dir, "node-key.pem"),
	}
	for path, data := range map[string][]byte{f.CA: ca.CertPEM(), f.Cert: clientCert, f.Key: clientKey,
		f.NodeCert: nodeCert, f.NodeKey: nodeKey} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
