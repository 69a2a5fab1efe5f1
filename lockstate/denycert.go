package lockstate

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"unicode/utf8"
)

// The certificate deny list revokes a certificate of the cluster's CA
// without replacing the CA: every node refuses a peer whose certificate
// serial is on it, on every port (docs/security.md). It is replicated, so
// one operator call reaches every node at the same entry.

// Limits on the deny list.
const (
	// MaxSerialLen bounds a serial in hex digits: RFC 5280 serials are at
	// most 20 octets.
	MaxSerialLen = 40
	// MaxDenyReason bounds a denial's reason in bytes.
	MaxDenyReason = 256
	// MaxDeniedCerts bounds the deny list: a CA that needs more denials
	// than this should be rotated instead.
	MaxDeniedCerts = 10000
)

// DenyCert puts a certificate serial on the deny list. With a token it
// needs a management token; without one it is accepted from the node
// that proposed it, which proposes it tokenless only for an operator's
// client certificate it verified (ForOperator), as it changes membership
// for one. Denying a serial already denied changes nothing: the first
// denial, its reason and index stay.
type DenyCert struct {
	Authority
	Serial string `msgpack:"serial"`
	Reason string `msgpack:"reason,omitempty"`
}

// ForOperator marks DenyCert as a command a node may propose without a
// token for a caller that presented an operator's certificate.
func (c *DenyCert) ForOperator() bool { return true }

// DeniedCert is one serial on the deny list.
type DeniedCert struct {
	Serial string `msgpack:"serial" json:"serial"`
	Reason string `msgpack:"reason" json:"reason"`
	Index  uint64 `msgpack:"index" json:"index"` // the DenyCert entry
}

// Validate checks the serial (CanonicalSerial's form), the reason and the
// token id.
func (c *DenyCert) Validate() *Error {
	if err := validAuth(c.Auth); err != nil {
		return err
	}
	s, err := CanonicalSerial(c.Serial)
	if err != nil {
		return err
	}
	if s != c.Serial {
		return invalidf("serial %q is not in canonical form %q", c.Serial, s)
	}
	if len(c.Reason) > MaxDenyReason || !utf8.ValidString(c.Reason) || strings.ContainsFunc(c.Reason, isControl) {
		return invalidf("reason must be valid UTF-8 without control characters, at most %d bytes", MaxDenyReason)
	}
	return nil
}

func (c *DenyCert) apply(t *Table) Result {
	if c.Auth != "" {
		if err := t.authorize(c.Auth, nil, AccessAdmin, ""); err != nil {
			return Result{Err: err}
		}
	}
	if _, ok := t.denied[c.Serial]; ok {
		return Result{}
	}
	if len(t.denied) >= MaxDeniedCerts {
		return Result{Err: errorf(CodeLimit, "the deny list holds %d serials, its most: rotate the CA instead", MaxDeniedCerts)}
	}
	if t.denied == nil {
		t.denied = make(map[string]DeniedCert)
	}
	t.denied[c.Serial] = DeniedCert{Serial: c.Serial, Reason: c.Reason, Index: t.index}
	return Result{}
}

// CanonicalSerial returns a certificate serial in the form the deny list
// keeps: lowercase hex without leading zeros. It accepts hex with or
// without colons between bytes (as openssl prints it) and an optional 0x.
func CanonicalSerial(s string) (string, *Error) {
	h := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), ":", ""))
	if h == "" || len(h) > 2*MaxSerialLen {
		return "", invalidf("serial %q is not a certificate serial in hex", s)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", invalidf("serial %q is not a certificate serial in hex", s)
		}
	}
	h = strings.TrimLeft(h, "0")
	if h == "" || len(h) > MaxSerialLen {
		return "", invalidf("serial %q is not a certificate serial: 1 to %d hex digits, not zero", s, MaxSerialLen)
	}
	return h, nil
}

// CertDenied reports whether a certificate's serial is on the deny list.
// A negative serial (which RFC 5280 forbids, but some CAs wrote) is never
// on it.
func (t *Table) CertDenied(serial *big.Int) bool {
	if serial == nil || serial.Sign() <= 0 || len(t.denied) == 0 {
		return false
	}
	_, ok := t.denied[serial.Text(16)]
	return ok
}

// DeniedCount returns how many serials the deny list holds.
func (t *Table) DeniedCount() int { return len(t.denied) }

// DeniedCerts returns the deny list by serial.
func (t *Table) DeniedCerts() []DeniedCert {
	out := make([]DeniedCert, 0, len(t.denied))
	for _, d := range t.denied {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b DeniedCert) int { return cmp.Compare(a.Serial, b.Serial) })
	return out
}

// DeniedCertRecord is one serial of the deny list in an export (snapshot
// format 5).
type DeniedCertRecord DeniedCert

func (rec *DeniedCertRecord) load(l *Loader) error {
	t := l.t
	d := DenyCert{Serial: rec.Serial, Reason: rec.Reason}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("lockstate: load: denied certificate: %w", err)
	}
	if t.denied[rec.Serial].Serial != "" || len(t.denied) >= MaxDeniedCerts {
		return fmt.Errorf("lockstate: load: denied certificate %s twice or too many", rec.Serial)
	}
	if t.denied == nil {
		t.denied = make(map[string]DeniedCert)
	}
	t.denied[rec.Serial] = DeniedCert(*rec)
	return nil
}

func (rec *DeniedCertRecord) digest(d *digester) {
	d.putTag('D')
	d.putString(rec.Serial)
	d.putString(rec.Reason)
	d.putUint(rec.Index)
}
