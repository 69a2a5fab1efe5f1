//go:build linux

package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// colonSerial reads a certificate's serial and writes it as openssl
// prints it (uppercase bytes with colons), and as the deny list keeps it.
func colonSerial(t *testing.T, cert, key string) (colons, canonical string) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, b := range leaf.SerialNumber.Bytes() {
		parts = append(parts, fmt.Sprintf("%02X", b))
	}
	return strings.Join(parts, ":"), leaf.SerialNumber.Text(16)
}

// TestCertDeny: on a real HTTPS node, an operator's client certificate
// denies its own serial with "lockctl cert deny"; from then on that
// certificate is refused while the node's own certificate still gets in
// and lists the denial.
func TestCertDeny(t *testing.T) {
	needBinaries(t)
	pki := t.TempDir()
	if out, err := exec.Command(lockdBin, "tls", "init", "--out", pki, "--node", "dev", "--client", "ops").CombinedOutput(); err != nil {
		t.Fatalf("lockd tls init: %v\n%s", err, out)
	}
	addr, _ := startDevProc(t, pki)
	ca := []string{"--ca-cert", filepath.Join(pki, "ca.pem")}
	ops := append([]string{"--client-cert", filepath.Join(pki, "ops.pem"), "--client-key", filepath.Join(pki, "ops-key.pem")}, ca...)
	node := append([]string{"--client-cert", filepath.Join(pki, "dev.pem"), "--client-key", filepath.Join(pki, "dev-key.pem")}, ca...)
	run := func(args []string, flags []string) (int, string, string) {
		t.Helper()
		return lockctl(t, addr, append(args, flags...)...)
	}
	if code, out, stderr := run([]string{"cert", "denied"}, ops); code != exitOK || !strings.HasPrefix(out, "SERIAL") || strings.Count(out, "\n") != 1 {
		t.Fatalf("cert denied before: exit %d %q %s", code, out, stderr)
	}
	if code, _, stderr := run([]string{"cert", "deny", "zz"}, ops); code != exitDataErr {
		t.Fatalf("cert deny zz: exit %d %s, want %d", code, stderr, exitDataErr)
	}
	if code, _, _ := run([]string{"cert"}, ops); code != exitUsage {
		t.Fatalf("cert alone: exit %d, want %d", code, exitUsage)
	}
	colons, serial := colonSerial(t, filepath.Join(pki, "ops.pem"), filepath.Join(pki, "ops-key.pem"))
	code, out, stderr := run([]string{"cert", "deny", "--reason", "laptop stolen", colons}, ops)
	if code != exitOK || out != "denied certificate serial "+serial+"\n" {
		t.Fatalf("cert deny: exit %d %q %s", code, out, stderr)
	}
	if code, out, stderr := run([]string{"status"}, ops); code == exitOK {
		t.Fatalf("status with the denied certificate: exit %d %s%s", code, out, stderr)
	}
	code, out, stderr = run([]string{"cert", "denied"}, node)
	if code != exitOK || !strings.Contains(out, serial) || !strings.Contains(out, "laptop stolen") {
		t.Fatalf("cert denied with the node's certificate: exit %d %q %s", code, out, stderr)
	}
	if code, _, stderr := run([]string{"cert", "deny", serial}, node); code != exitOK {
		t.Fatalf("denying a denied serial again: exit %d %s", code, stderr)
	}
}
