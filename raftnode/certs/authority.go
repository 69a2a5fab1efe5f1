// Package certs holds the certificates of a lockd cluster: issuing them,
// loading them, reloading them, and the TLS configs of each port.
//
// A cluster has one certificate authority. Every node has a node
// certificate, good for both ends of a TLS connection because a node both
// serves and dials the node port; its common name is the node id. API
// clients (lockctl, operators) may have client certificates, which open
// the HTTP API when client certificates are required and nothing else.
// All keys are ECDSA P-256.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 365 * 24 * time.Hour
	// backdate makes a fresh certificate valid on a node whose clock is a
	// little behind the machine that issued it.
	backdate = time.Hour
)

// Authority is a cluster's certificate authority: the CA certificate and
// the key that signs node and client certificates.
type Authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// NewAuthority makes a new CA in memory: a self-signed ECDSA P-256
// certificate valid for 10 years. WriteFiles saves it.
func NewAuthority() (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// A distinct name per CA tells two clusters' CAs apart in errors
		// and in a trust store holding both (as while rotating).
		Subject:               pkix.Name{Organization: []string{"lockd"}, CommonName: fmt.Sprintf("lockd CA %032x", serial)[:17]},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // it signs nodes and clients, no intermediate CAs
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{cert: cert, key: key, certPEM: encodePEM(pemCertificate, der), keyPEM: encodePEM(pemPrivateKey, keyDER)}, nil
}

// caName is the base name of a CA's files in its directory: ca.pem and
// ca-key.pem.
const caName = "ca"

// LoadAuthority reads the CA that WriteFiles wrote to dir.
func LoadAuthority(dir string) (*Authority, error) {
	certFile, keyFile := pairPaths(dir, caName)
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	chain, err := parseCertificates(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	cert := chain[0]
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s is not a CA certificate", certFile)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of %s", keyFile, certFile)
	}
	return &Authority{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// WriteFiles writes the CA to dir/ca.pem and its key to dir/ca-key.pem
// (0600), creating dir (0700) if need be. It never overwrites a file.
func (a *Authority) WriteFiles(dir string) error {
	return WriteKeyPair(dir, caName, a.certPEM, a.keyPEM)
}

// CertPEM is the CA certificate in PEM: what nodes and clients trust.
func (a *Authority) CertPEM() []byte { return bytes.Clone(a.certPEM) }

// Node issues a node certificate for the node id name, valid for one
// year (not beyond the CA): both server and client use, so that the node
// can serve and dial the node port. Its subject alternative names are
// name, localhost and dnsNames, and 127.0.0.1, ::1 and ips.
func (a *Authority) Node(name string, ips []net.IP, dnsNames []string) (certPEM, keyPEM []byte, err error) {
	if err := checkName(name); err != nil {
		return nil, nil, err
	}
	tmpl, err := a.template(name, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, nil, err
	}
	for _, dns := range append([]string{name, "localhost"}, dnsNames...) {
		if dns != "" && !slices.Contains(tmpl.DNSNames, dns) {
			tmpl.DNSNames = append(tmpl.DNSNames, dns)
		}
	}
	for _, ip := range append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...) {
		if ip != nil && !slices.ContainsFunc(tmpl.IPAddresses, ip.Equal) {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		}
	}
	return a.issue(tmpl)
}

// Client issues a client certificate named name, valid for one year (not
// beyond the CA): client use only, so it opens the HTTP API but is
// refused on the node port.
func (a *Authority) Client(name string) (certPEM, keyPEM []byte, err error) {
	if err := checkName(name); err != nil {
		return nil, nil, err
	}
	tmpl, err := a.template(name, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, nil, err
	}
	return a.issue(tmpl)
}

// template is the part that node and client certificates share.
func (a *Authority) template(name string, usages ...x509.ExtKeyUsage) (*x509.Certificate, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"lockd"}, CommonName: name},
		NotBefore:    now.Add(-backdate),
		// Beyond the CA it would not verify anyway; this way the date
		// printed on it is the truth.
		NotAfter:    minTime(now.Add(certValidity), a.cert.NotAfter),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: usages,
	}, nil
}

// issue signs tmpl for a new key.
func (a *Authority) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodePEM(pemCertificate, der), encodePEM(pemPrivateKey, keyDER), nil
}

// checkName accepts a name that can be a certificate's common name and
// DNS name (both ASCII) and the base of its file names.
func checkName(name string) error {
	if name == "" {
		return errors.New("certs: empty name")
	}
	for _, r := range name {
		if r <= ' ' || r > '~' || r == '/' || r == '\\' {
			return fmt.Errorf("certs: name %q: only printable ASCII without spaces or slashes", name)
		}
	}
	if name == "." || name == ".." || strings.HasPrefix(name, "-") {
		return fmt.Errorf("certs: name %q is not usable as a file name", name)
	}
	return nil
}

// newSerial is a random 128-bit serial number: unique without a registry
// of issued serials.
func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// pairPaths are the files of the pair name in dir: name.pem and
// name-key.pem.
func pairPaths(dir, name string) (certFile, keyFile string) {
	return filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
}
