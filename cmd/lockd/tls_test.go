package main

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockd/lockd/raftnode/certs"
)

// runCLI runs a subcommand function as main would and returns its exit
// code and output.
func runCLI(cmd func([]string, io.Writer, io.Writer) int, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = cmd(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	caDir, nodeDir := filepath.Join(dir, "ca"), filepath.Join(dir, "n1")
	for _, args := range [][]string{
		{"ca", "--out", caDir},
		{"cert", "--ca", caDir, "--name", "n1", "--ip", "10.0.0.1, 10.0.0.2", "--dns", "n1.example", "--out", nodeDir},
		{"cert", "--ca", caDir, "--client", "--name", "ops", "--out", caDir},
	} {
		if code, stdout, stderr := runCLI(tlsMain, args...); code != 0 || !strings.Contains(stdout, "wrote") {
			t.Fatalf("lockd tls %q: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}

	node := readCert(t, filepath.Join(nodeDir, "n1.pem"))
	var ips []string
	for _, ip := range node.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !slices.Equal(ips, []string{"127.0.0.1", "::1", "10.0.0.1", "10.0.0.2"}) ||
		!slices.Equal(node.DNSNames, []string{"n1", "localhost", "n1.example"}) {
		t.Errorf("node certificate names %v %v", ips, node.DNSNames)
	}
	for _, key := range []string{filepath.Join(caDir, "ca-key.pem"), filepath.Join(nodeDir, "n1-key.pem"), filepath.Join(caDir, "ops-key.pem")} {
		if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", key, fi.Mode(), err)
		}
	}
	// What was written is what a node and a client load.
	ca := filepath.Join(caDir, "ca.pem")
	s, err := certs.Load(certs.Files{CA: ca, Cert: filepath.Join(nodeDir, "n1.pem"), Key: filepath.Join(nodeDir, "n1-key.pem")})
	if err != nil || s.NodeID() != "n1" {
		t.Fatalf("the node certificate does not load: %v", err)
	}
	if _, err := certs.ClientConfig(ca, filepath.Join(caDir, "ops.pem"), filepath.Join(caDir, "ops-key.pem")); err != nil {
		t.Fatalf("the client certificate does not load: %v", err)
	}
	if ops := readCert(t, filepath.Join(caDir, "ops.pem")); !slices.Equal(ops.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("client certificate usages %v", ops.ExtKeyUsage)
	}

	before, _ := os.ReadFile(ca)
	for _, args := range [][]string{
		{"ca", "--out", caDir},
		{"cert", "--ca", caDir, "--name", "n1", "--out", nodeDir},
		{"cert", "--ca", caDir, "--client", "--name", "ops", "--out", caDir},
	} {
		if code, _, stderr := runCLI(tlsMain, args...); code != 1 || !strings.Contains(stderr, "refusing to overwrite") {
			t.Errorf("lockd tls %q again: exit %d, %q", args, code, stderr)
		}
	}
	if after, _ := os.ReadFile(ca); !bytes.Equal(before, after) {
		t.Error("a refused lockd tls ca changed ca.pem")
	}
}

func TestTLSCommandErrors(t *testing.T) {
	caDir := t.TempDir()
	if code, _, stderr := runCLI(tlsMain, "ca", "--out", caDir); code != 0 {
		t.Fatal(stderr)
	}
	out := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{nil, 2, "usage: lockd tls"},
		{[]string{"sign"}, 2, `unknown subcommand "sign"`},
		{[]string{"ca"}, 2, "--out is required"},
		{[]string{"ca", "--out", out, "extra"}, 2, "unexpected arguments"},
		{[]string{"ca", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"cert", "--name", "n1", "--out", out}, 2, "are required"},
		{[]string{"cert", "--ca", caDir, "--out", out}, 2, "are required"},
		{[]string{"cert", "--ca", caDir, "--name", "n1"}, 2, "are required"},
		{[]string{"cert", "--ca", caDir, "--name", "n1", "--ip", "10.0.0.300", "--out", out}, 2, "not an IP address"},
		{[]string{"cert", "--ca", caDir, "--name", "ops", "--client", "--ip", "10.0.0.1", "--out", out}, 2, "not with --client"},
		{[]string{"cert", "--ca", out, "--name", "n1", "--out", out}, 1, "ca.pem"},
		{[]string{"cert", "--ca", caDir, "--name", "../n1", "--out", out}, 1, "name"},
		{[]string{"--help"}, 0, ""},
		{[]string{"ca", "--help"}, 0, "usage: lockd tls ca --out DIR"},
		{[]string{"cert", "-h"}, 0, "-client"},
	} {
		code, _, stderr := runCLI(tlsMain, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.says) {
			t.Errorf("lockd tls %q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.says)
		}
	}
	if code, stdout, _ := runCLI(tlsMain, "--help"); code != 0 || !strings.Contains(stdout, "lockd tls cert --ca DIR --client") {
		t.Errorf("lockd tls --help: exit %d, %q", code, stdout)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("failed commands wrote %v", entries)
	}
}

func TestKeygen(t *testing.T) {
	keys := map[string]bool{}
	for range 2 {
		code, stdout, stderr := runCLI(keygen)
		if code != 0 || !strings.HasSuffix(stdout, "\n") {
			t.Fatalf("lockd keygen: exit %d, %q %q", code, stdout, stderr)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(stdout, "\n"))
		if err != nil || len(key) != 32 {
			t.Fatalf("lockd keygen printed %q: %d bytes, %v", stdout, len(key), err)
		}
		keys[stdout] = true
	}
	if len(keys) != 2 {
		t.Error("lockd keygen printed the same key twice")
	}
	if code, _, _ := runCLI(keygen, "extra"); code != 2 {
		t.Errorf("lockd keygen extra: exit %d, want 2", code)
	}
}

// tls init makes only what is missing: a second run adds a new node and
// keeps every existing file as it was.
func TestTLSInitMakesWhatIsMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, _, stderr := runCLI(tlsMain, "init", "--out", dir, "--node", "n1=10.0.0.11", "--client", "admin", "--gossip-key")
	if code != 0 {
		t.Fatalf("first init: exit %d: %s", code, stderr)
	}
	first, err := os.ReadFile(filepath.Join(dir, "n1.pem"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(tlsMain, "init", "--out", dir, "--node", "n1=10.0.0.11", "--node", "n2", "--client", "admin", "--gossip-key")
	if code != 0 {
		t.Fatalf("second init: exit %d: %s", code, stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "n1.pem")); !bytes.Equal(again, first) {
		t.Fatal("a second init replaced n1's certificate")
	}
	if _, err := certs.Load(certs.Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "n2.pem"),
		Key: filepath.Join(dir, "n2-key.pem")}); err != nil {
		t.Fatalf("n2's identity from the same CA: %v", err)
	}
	if ip := readCert(t, filepath.Join(dir, "n1.pem")).IPAddresses; !slices.ContainsFunc(ip, func(a net.IP) bool { return a.String() == "10.0.0.11" }) {
		t.Fatalf("n1's certificate lists %v, not 10.0.0.11", ip)
	}
	key, err := os.ReadFile(filepath.Join(dir, "gossip.key"))
	if raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(string(key))); err != nil || derr != nil || len(raw) != 32 {
		t.Fatalf("gossip.key %q: %v %v", key, err, derr)
	}
}
