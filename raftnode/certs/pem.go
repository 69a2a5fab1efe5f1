package certs

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

const (
	pemCertificate = "CERTIFICATE"
	pemPrivateKey  = "PRIVATE KEY" // PKCS #8
	pemECKey       = "EC PRIVATE KEY"
)

func encodePEM(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// parseCertificates parses every CERTIFICATE block of data, in order.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != pemCertificate {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}

// parsePrivateKey parses the first private key of data: PKCS #8 as this
// package writes it, or SEC 1 as openssl ecparam does.
func parsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		switch {
		case block == nil:
			return nil, errors.New("no PEM private key")
		case block.Type == pemECKey:
			return x509.ParseECPrivateKey(block.Bytes)
		case block.Type == pemPrivateKey:
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			signer, ok := key.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("a %T cannot sign", key)
			}
			return signer, nil
		}
	}
}

// WriteKeyPair writes a certificate to dir/name.pem and its key to
// dir/name-key.pem (0600), creating dir (0700) if need be. It never
// overwrites a file: if either exists it writes nothing.
func WriteKeyPair(dir, name string, certPEM, keyPEM []byte) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	certFile, keyFile := pairPaths(dir, name)
	for _, f := range []string{certFile, keyFile} {
		if _, err := os.Lstat(f); err == nil {
			return fmt.Errorf("%s already exists: refusing to overwrite it", f)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := writeNew(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	// The certificate is public; 0644 lets a service user read it.
	if err := writeNew(certFile, certPEM, 0o644); err != nil {
		os.Remove(keyFile)
		return err
	}
	return nil
}

// writeNew creates path with data; O_EXCL makes a file that appeared
// since WriteKeyPair looked an error rather than a victim.
func writeNew(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists: refusing to overwrite it", path)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}
