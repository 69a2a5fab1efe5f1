package lockservice

import (
	"context"
	"math/big"

	"github.com/lockd/lockd/lockstate"
)

// DenyCert puts a certificate serial on the replicated deny list
// (lockstate.DenyCert): a management token, or an operator's certificate
// (Caller.Operator). serial may be written as openssl prints it; the list
// keeps lockstate.CanonicalSerial's form, which it returns. Denying a
// serial twice is no error, so an unknown outcome is proposed again.
func (s *Service) DenyCert(ctx context.Context, serial, reason string) (string, error) {
	canon, verr := lockstate.CanonicalSerial(serial)
	if verr != nil {
		return "", verr
	}
	if _, _, err := s.propose(ctx, &lockstate.DenyCert{Serial: canon, Reason: reason}, idempotent); err != nil {
		return "", err
	}
	return canon, nil
}

// DeniedCerts lists the deny list by serial: for a management token or an
// operator's certificate.
func (s *Service) DeniedCerts(ctx context.Context, c Consistency) ([]lockstate.DeniedCert, error) {
	if err := s.catchUp(ctx, c); err != nil {
		return nil, err
	}
	var out []lockstate.DeniedCert
	if callerOf(ctx).Operator {
		s.fsm.Read(func(t *lockstate.Table) { out = t.DeniedCerts() })
		return out, nil
	}
	err := s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		if err := mayAdmin(tok); err != nil {
			return err
		}
		out = t.DeniedCerts()
		return nil
	})
	return out, err
}

// CertDenied reports whether a certificate serial is on this node's
// applied deny list: the API refuses requests on an open connection whose
// client certificate was denied after its handshake.
func (s *Service) CertDenied(serial *big.Int) bool { return s.fsm.CertDenied(serial) }
