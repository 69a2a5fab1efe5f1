package client

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"

	"github.com/lockd/lockd/raftnode/certs"
)

// The environment variables New reads for TLS, beside EnvAddr. Setting
// EnvCACert, or EnvClientCert and EnvClientKey, makes the client speak
// HTTPS.
const (
	// EnvCACert names a PEM file of the CA certificate(s) that signed the
	// nodes' certificates (default: the system roots).
	EnvCACert = "LOCKD_CACERT"
	// EnvClientCert and EnvClientKey name the PEM files of the client
	// certificate and its key, for a cluster whose nodes require one
	// (--tls-client-auth). A node certificate serves as well.
	EnvClientCert = "LOCKD_CLIENT_CERT"
	EnvClientKey  = "LOCKD_CLIENT_KEY"
)

// WithTLS makes the client speak HTTPS with cfg (see TLSConfig): every
// endpoint, configured or learned from the cluster, is reached with
// https://. With WithHTTPClient, cfg goes into a copy of that client's
// *http.Transport; another RoundTripper must do TLS itself. WithTLS(nil)
// makes the client ignore the TLS environment variables.
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) { c.tls, c.tlsSet = cfg, true }
}

// TLSConfig is the TLS config of an API client that trusts the CA in
// caFile (the system roots if caFile is "") and presents the client
// certificate in certFile and keyFile, if given. It is nil, without an
// error, when all three are "": plain HTTP.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	return certs.ClientConfig(caFile, certFile, keyFile)
}

// tlsConfigFromEnv is TLSConfig of the files EnvCACert, EnvClientCert
// and EnvClientKey name; nil when none is set.
func tlsConfigFromEnv() (*tls.Config, error) {
	return TLSConfig(os.Getenv(EnvCACert), os.Getenv(EnvClientCert), os.Getenv(EnvClientKey))
}

// ErrHTTPSRequired is the error of a call the client made in plain HTTP
// to a node that speaks HTTPS: the client was given no CA certificate
// (nor a client certificate), so it did not know to use TLS. It is a
// configuration error, not a failure of the node, and is not retried.
var ErrHTTPSRequired = errors.New("the node speaks HTTPS, this client spoke plain HTTP: " +
	"give it the cluster's CA certificate (" + EnvCACert + "=ca.pem, or WithTLS; lockctl and lockd: --ca-cert)")

// httpsRequired reports whether a plain-HTTP answer of status with body b
// is Go's TLS server telling a plain-HTTP client to use TLS.
func httpsRequired(status int, b []byte) bool {
	return status == http.StatusBadRequest && bytes.Contains(b, []byte("HTTP request to an HTTPS server"))
}

// withTLS returns hc, or a copy of it whose transport uses cfg.
func withTLS(hc *http.Client, cfg *tls.Config) *http.Client {
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return hc
	}
	t = t.Clone()
	t.TLSClientConfig = cfg
	cp := *hc
	cp.Transport = t
	return &cp
}

// isTLSRefusal reports whether err is a TLS handshake that failed for
// good: the server's certificate did not verify, the server refused ours
// (a TLS alert, e.g. "certificate required"), or it speaks plain HTTP or
// no HTTP at all. Another attempt would fail the same way, so such calls
// are not retried.
func isTLSRefusal(err error) bool {
	var verr *tls.CertificateVerificationError
	var rerr tls.RecordHeaderError
	var oe *net.OpError
	return errors.As(err, &verr) || errors.As(err, &rerr) || errors.Is(err, http.ErrSchemeMismatch) ||
		(errors.As(err, &oe) && oe.Op == "remote error") // crypto/tls's only use of this Op: an alert
}
