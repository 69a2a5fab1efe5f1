package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"sync/atomic"
)

// Files names the PEM files of a node's TLS identity.
type Files struct {
	CA   string // the CA certificate(s) the cluster trusts
	Cert string // the node certificate, followed by any intermediates
	Key  string // the node certificate's key
}

// Store is a node's TLS identity: its node certificate and key and the
// CA it trusts. The configs it makes read the current identity at every
// handshake, so a Reload applies to new connections at once while
// established ones go on.
type Store struct {
	files  Files
	cur    atomic.Pointer[identity]
	denied atomic.Pointer[func(serial *big.Int) bool] // SetDenied
}

// identity is one immutable state of a Store.
type identity struct {
	cert  *tls.Certificate // Leaf set
	roots *x509.CertPool
}

// A role is what a certificate must be good for.
type role struct {
	name   string
	usages []x509.ExtKeyUsage
}

var (
	// nodeRole: a node both serves and dials the node port.
	nodeRole = role{"node", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	// clientRole is what the HTTP API asks of a client; node
	// certificates are good for it too.
	clientRole = role{"client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
)

// Load reads a node's identity and checks it: the certificate chains to
// the CA, the key is its key, and it is a node certificate.
func Load(f Files) (*Store, error) {
	id, err := loadIdentity(f)
	if err != nil {
		return nil, err
	}
	s := &Store{files: f}
	s.cur.Store(id)
	return s, nil
}

// Reload reads and checks the files again (say on SIGHUP) and, if they
// are good, swaps them in for new connections. On any error it keeps the
// current identity and returns the error for the caller to log.
func (s *Store) Reload() error {
	id, err := loadIdentity(s.files)
	if err != nil {
		return err
	}
	s.cur.Store(id)
	return nil
}

// NodeID is the common name of the current node certificate: the node
// id it was issued for.
func (s *Store) NodeID() string {
	return s.cur.Load().cert.Leaf.Subject.CommonName
}

func loadIdentity(f Files) (*identity, error) {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return nil, errors.New("certs: the CA, certificate and key files are all needed")
	}
	roots, err := readPool(f.CA)
	if err != nil {
		return nil, err
	}
	// LoadX509KeyPair checks that the key is the certificate's.
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", f.Cert, f.Key, err)
	}
	chain := make([]*x509.Certificate, len(cert.Certificate))
	for i, der := range cert.Certificate {
		if chain[i], err = x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Cert, err)
		}
	}
	cert.Leaf = chain[0]
	id := &identity{cert: &cert, roots: roots}
	if err := id.verify(chain, nodeRole); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Cert, err)
	}
	return id, nil
}

// readPool reads a file of CA certificates. More than one is for
// rotating the CA: the old and the new are trusted for a while.
func readPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	cas, err := parseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	return pool, nil
}

// verify checks that chain (leaf first, as a peer presents it) leads to
// the trusted CA and that the leaf names every usage of r. Each usage
// is verified on its own because x509 accepts a chain good for any one
// of the usages asked, and it is named explicitly because x509 lets a
// certificate without any extended key usage pass for all of them.
func (id *identity) verify(chain []*x509.Certificate, r role) error {
	if len(chain) == 0 {
		return errors.New("certs: no certificate presented")
	}
	leaf := chain[0]
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	for _, u := range r.usages {
		if !slices.Contains(leaf.ExtKeyUsage, u) {
			return fmt.Errorf("certs: certificate %q is not a %s certificate: it lacks %s use", leaf.Subject.CommonName, r.name, usageName(u))
		}
		opts := x509.VerifyOptions{Roots: id.roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{u}}
		if _, err := leaf.Verify(opts); err != nil {
			return fmt.Errorf("certs: certificate %q: %w", leaf.Subject.CommonName, err)
		}
	}
	return nil
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "server"
	case x509.ExtKeyUsageClientAuth:
		return "client"
	}
	return fmt.Sprintf("extended key usage %d", u)
}
