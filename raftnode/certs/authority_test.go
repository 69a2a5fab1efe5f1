package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func newAuthority(t *testing.T) *Authority {
	t.Helper()
	ca, err := NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func parseOne(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	chain, err := parseCertificates(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return chain[0]
}

func TestIssuedCertificates(t *testing.T) {
	ca := newAuthority(t)
	caCert := parseOne(t, ca.CertPEM())
	if !caCert.IsCA || caCert.NotAfter.Before(time.Now().Add(9*365*24*time.Hour)) {
		t.Errorf("CA: IsCA %v, valid until %v; want a CA for 10 years", caCert.IsCA, caCert.NotAfter)
	}
	nodePEM, nodeKey, err := ca.Node("n1", []net.IP{net.ParseIP("10.0.0.1")}, []string{"n1.example", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	clientPEM, clientKey, err := ca.Client("ops")
	if err != nil {
		t.Fatal(err)
	}
	node, client := parseOne(t, nodePEM), parseOne(t, clientPEM)

	if node.Subject.CommonName != "n1" || !slices.Equal(node.ExtKeyUsage, nodeRole.usages) {
		t.Errorf("node: CN %q, usages %v", node.Subject.CommonName, node.ExtKeyUsage)
	}
	if want := []string{"n1", "localhost", "n1.example"}; !slices.Equal(node.DNSNames, want) {
		t.Errorf("node DNS names %q, want %q", node.DNSNames, want)
	}
	var ips []string
	for _, ip := range node.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"127.0.0.1", "::1", "10.0.0.1"}; !slices.Equal(ips, want) {
		t.Errorf("node IPs %q, want %q", ips, want)
	}
	if client.Subject.CommonName != "ops" || !slices.Equal(client.ExtKeyUsage, clientRole.usages) ||
		len(client.DNSNames)+len(client.IPAddresses) != 0 {
		t.Errorf("client: CN %q, usages %v, names %v %v", client.Subject.CommonName, client.ExtKeyUsage, client.DNSNames, client.IPAddresses)
	}
	for _, c := range []struct {
		cert   *x509.Certificate
		keyPEM []byte
	}{{node, nodeKey}, {client, clientKey}} {
		if err := c.cert.CheckSignatureFrom(caCert); err != nil {
			t.Errorf("%s: %v", c.cert.Subject.CommonName, err)
		}
		if life := time.Until(c.cert.NotAfter); life < 364*24*time.Hour || life > 366*24*time.Hour {
			t.Errorf("%s: valid for %v more, want a year", c.cert.Subject.CommonName, life)
		}
		if c.cert.SerialNumber.BitLen() < 64 {
			t.Errorf("%s: serial %v is not random 128 bits", c.cert.Subject.CommonName, c.cert.SerialNumber)
		}
		key, err := parsePrivateKey(c.keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		if k, ok := key.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() || !k.PublicKey.Equal(c.cert.PublicKey) {
			t.Errorf("%s: key is not the ECDSA P-256 key of the certificate", c.cert.Subject.CommonName)
		}
	}
	if node.SerialNumber.Cmp(client.SerialNumber) == 0 {
		t.Error("two certificates share a serial")
	}
}

func TestBadNames(t *testing.T) {
	ca := newAuthority(t)
	for _, name := range []string{"", ".", "..", "a/b", `a\b`, "../n1", "-n1", "n 1", "nœud"} {
		if _, _, err := ca.Node(name, nil, nil); err == nil {
			t.Errorf("Node(%q) accepted", name)
		}
		if _, _, err := ca.Client(name); err == nil {
			t.Errorf("Client(%q) accepted", name)
		}
		if err := WriteKeyPair(t.TempDir(), name, []byte("c"), []byte("k")); err == nil {
			t.Errorf("WriteKeyPair(%q) accepted", name)
		}
	}
}

func TestAuthorityFiles(t *testing.T) {
	ca := newAuthority(t)
	dir := filepath.Join(t.TempDir(), "ca")
	if err := ca.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, filepath.Join(dir, "ca-key.pem"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	loaded, err := LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(loaded.CertPEM(), ca.CertPEM()) {
		t.Error("LoadAuthority read another CA")
	}
	certPEM, _, err := loaded.Node("n1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := parseOne(t, certPEM).CheckSignatureFrom(parseOne(t, ca.CertPEM())); err != nil {
		t.Errorf("a loaded CA signs for the original: %v", err)
	}

	if err := newAuthority(t).WriteFiles(dir); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("WriteFiles over a CA: %v", err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); !bytes.Equal(again, ca.CertPEM()) {
		t.Error("a refused WriteFiles changed ca.pem")
	}

	// A key that is not the CA's, a CA that is not a CA, no CA at all.
	other := newAuthority(t)
	nodePEM, nodeKey, _ := other.Node("n1", nil, nil)
	for name, files := range map[string][2][]byte{
		"foreign key": {ca.CertPEM(), other.keyPEM},
		"not a CA":    {nodePEM, nodeKey},
		"no key":      {ca.CertPEM(), pem.EncodeToMemory(&pem.Block{Type: "NOTHING"})},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "ca.pem"), files[0], 0o644)
		os.WriteFile(filepath.Join(dir, "ca-key.pem"), files[1], 0o600)
		if _, err := LoadAuthority(dir); err == nil {
			t.Errorf("%s: LoadAuthority accepted it", name)
		}
	}
	if _, err := LoadAuthority(t.TempDir()); err == nil {
		t.Error("LoadAuthority of an empty directory")
	}
}

func TestWriteKeyPairWritesAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "n1-key.pem"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteKeyPair(dir, "n1", []byte("cert"), []byte("key")); err == nil {
		t.Fatal("WriteKeyPair overwrote a key")
	}
	if _, err := os.Stat(filepath.Join(dir, "n1.pem")); !os.IsNotExist(err) {
		t.Errorf("a refused WriteKeyPair wrote the certificate: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "n1-key.pem")); string(b) != "old" {
		t.Errorf("key is now %q", b)
	}
}
