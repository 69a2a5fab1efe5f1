package api_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/client/clienttest"
	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/lockstate"
)

// serialOf reads the serial of the certificate in a PEM file.
func serialOf(t *testing.T, certFile, keyFile string) *big.Int {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber
}

// colonHex writes a serial as openssl prints it: uppercase bytes with colons.
func colonHex(serial *big.Int) string {
	var parts []string
	for _, b := range serial.Bytes() {
		parts = append(parts, fmt.Sprintf("%02X", b))
	}
	return strings.Join(parts, ":")
}

// httpsClient is one keep-alive connection's client presenting cert.
func httpsClient(t *testing.T, files clienttest.TLSFiles, cert, key string) *http.Client {
	t.Helper()
	conf, err := client.TLSConfig(files.CA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: conf, MaxConnsPerHost: 1}}
}

// call makes one request and reads its whole answer, so that its
// connection is kept for the next.
func call(hc *http.Client, method, url string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// An operator's client certificate denies its own serial on the HTTP
// port: its open connection's next request gets 403, a new connection
// with it is refused at the handshake, and an undenied certificate of the
// same CA still gets in.
func TestDeniedClientCertificateIsRefused(t *testing.T) {
	n := singleNode(t, nodeOptions{api: func(cfg *api.Config) { cfg.OperatorCert = true }})
	srv, files := clienttest.NewTLSServerDenying(t, n.srv, false, n.node.CertDenied)
	operator := httpsClient(t, files, files.Cert, files.Key)
	serial := serialOf(t, files.Cert, files.Key)

	if code, body, err := call(operator, "GET", srv.URL+"/v1/certs/denied", nil); err != nil || code != http.StatusOK || string(bytes.TrimSpace(body)) != "[]" {
		t.Fatalf("deny list before: %d %s %v", code, body, err)
	}
	if code, body, err := call(httpsClient(t, files, "", ""), "POST", srv.URL+"/v1/certs/denied", wire.DenyCertRequest{Serial: "ab"}); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("a denial without a certificate or token: %d %s %v, want 401", code, body, err)
	}
	code, body, err := call(operator, "POST", srv.URL+"/v1/certs/denied", wire.DenyCertRequest{Serial: colonHex(serial), Reason: "leaked"})
	var ans wire.DenyCertResponse
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.Denied != serial.Text(16) {
		t.Fatalf("deny %s: %d %s %v, want 200 and %s", colonHex(serial), code, body, err, serial.Text(16))
	}
	// The connection the denial came on is still open: its next request
	// is refused, and the connection closed.
	if code, body, err := call(operator, "GET", srv.URL+"/v1/status", nil); err != nil || code != http.StatusForbidden {
		t.Fatalf("a denied certificate's open connection: %d %s %v, want 403", code, body, err)
	}
	if code, body, err := call(httpsClient(t, files, files.Cert, files.Key), "GET", srv.URL+"/v1/status", nil); err == nil {
		t.Fatalf("a denied certificate's new connection was answered: %d %s", code, body)
	}
	other := httpsClient(t, files, files.NodeCert, files.NodeKey)
	code, body, err = call(other, "GET", srv.URL+"/v1/status", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("an undenied certificate of the same CA: %d %s %v, want 200", code, body, err)
	}
	code, body, err = call(other, "GET", srv.URL+"/v1/certs/denied", nil)
	if err != nil || code != http.StatusForbidden {
		t.Fatalf("deny list with a non-member's node certificate: %d %s %v, want 403", code, body, err)
	}
	var list []lockstate.DeniedCert
	n.node.FSM().Read(func(t *lockstate.Table) { list = t.DeniedCerts() })
	if len(list) != 1 || list[0].Serial != serial.Text(16) || list[0].Reason != "leaked" {
		t.Fatalf("deny list: %+v", list)
	}
}
