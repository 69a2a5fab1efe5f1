package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
)

// The configs of a Store check peers' certificates themselves, in
// VerifyConnection, against the CA of the moment: crypto/tls's own
// checks would use the pool the config was built with, which a Reload
// could not replace. VerifyConnection runs on every handshake,
// resumptions included.

// APIServer is the TLS config of the HTTP API. With requireClientCert a
// client must present a certificate signed by the CA, a client or a node
// certificate. Without it a client may present one, which is verified
// just the same: the API's operator endpoints ask for it.
func (s *Store) APIServer(requireClientCert bool) *tls.Config {
	c := s.server()
	c.ClientAuth = tls.RequestClientCert // verified below
	verify := s.verifyPeer(clientRole)
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 && !requireClientCert {
			return nil
		}
		return verify(cs)
	}
	if requireClientCert {
		c.ClientAuth = tls.RequireAnyClientCert
	}
	return c
}

// PeerServer is the TLS config of the node port (raft and the internal
// RPC): the peer must present a node certificate signed by the CA. A
// client certificate is refused.
func (s *Store) PeerServer() *tls.Config {
	c := s.server()
	c.ClientAuth = tls.RequireAnyClientCert // verified below
	c.VerifyConnection = s.verifyPeer(nodeRole)
	return c
}

// PeerClient is the TLS config for dialing another node's port: it
// presents this node's certificate and accepts only a node certificate
// signed by the CA.
func (s *Store) PeerClient() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
		// Nodes dial each other by the IP:port of the raft
		// configuration, which a node certificate need not list, so the
		// standard check (chain plus host name) is off and
		// VerifyConnection checks the chain and the node usages instead.
		// Which node answered is PeerName's business.
		InsecureSkipVerify: true,
		VerifyConnection:   s.verifyPeer(nodeRole),
	}
}

// server is what the server configs share.
func (s *Store) server() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
	}
}

func (s *Store) verifyPeer(r role) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if err := s.cur.Load().verify(cs.PeerCertificates, r); err != nil {
			return err
		}
		return s.checkDenied(cs.PeerCertificates)
	}
}

// SetDenied sets the certificate deny list every config of the Store
// checks at each handshake, after the chain: denied reports whether a
// serial is denied (the node's replicated list). A certificate of the
// presented chain whose serial it denies is refused. It survives Reload,
// which replaces only the identity. nil (the default) denies nothing.
func (s *Store) SetDenied(denied func(serial *big.Int) bool) {
	if denied == nil {
		s.denied.Store(nil)
		return
	}
	s.denied.Store(&denied)
}

// checkDenied refuses a chain with a denied certificate.
func (s *Store) checkDenied(chain []*x509.Certificate) error {
	d := s.denied.Load()
	if d == nil {
		return nil
	}
	for _, c := range chain {
		if (*d)(c.SerialNumber) {
			return fmt.Errorf("certs: certificate %q (serial %x) is on the cluster's deny list", c.Subject.CommonName, c.SerialNumber)
		}
	}
	return nil
}

// PeerSerial is the serial of the certificate the other end of a
// connection presented, nil if none.
func PeerSerial(cs tls.ConnectionState) *big.Int {
	if len(cs.PeerCertificates) == 0 {
		return nil
	}
	return cs.PeerCertificates[0].SerialNumber
}

// PeerName is the common name of the certificate the other end of a
// connection presented, "" if none. On a connection made with PeerServer
// or PeerClient it is a verified node certificate, and its name is the
// peer's node id.
func PeerName(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.CommonName
}

// ClientConfig is the TLS config of an HTTP API client (lockctl, the Go
// client): it trusts the CA in caFile, or the system roots if caFile is
// "", and verifies the server's name as usual; it presents the client
// certificate in certFile and keyFile if they are given.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS13}
	if caFile != "" {
		roots, err := readPool(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = roots
	}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case certFile != "" || keyFile != "":
		return nil, errors.New("certs: a client certificate needs both its certificate and its key file")
	}
	return c, nil
}
