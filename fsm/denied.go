package fsm

import "math/big"

// deniedSet is the table's certificate deny list as canonical serials
// (lockstate.CanonicalSerial's form, which big.Int.Text(16) of a positive
// serial is),
// published whole (never changed once published) so that CertDenied can
// read it without the table's lock.
type deniedSet map[string]struct{}

// CertDenied reports whether a certificate serial is on the deny list of
// the table as applied now (lockstate.DenyCert). It takes no lock: every
// TLS handshake and every read on an admitted raft connection asks it,
// and must not wait for an entry being applied. A negative serial is
// never denied (see lockstate.Table.CertDenied).
func (f *FSM) CertDenied(serial *big.Int) bool {
	set := f.denied.Load()
	if set == nil || len(*set) == 0 || serial == nil || serial.Sign() <= 0 {
		return false
	}
	_, ok := (*set)[serial.Text(16)]
	return ok
}

// publishDenied publishes the table's deny list for CertDenied. After an
// Apply it rebuilds the set only when the list grew (it never shrinks);
// force rebuilds it anyway, for a restored table. Call it with mu held.
func (f *FSM) publishDenied(force bool) {
	n := f.table.DeniedCount()
	if cur := f.denied.Load(); !force && (cur == nil && n == 0 || cur != nil && len(*cur) == n) {
		return
	}
	set := make(deniedSet, n)
	for _, d := range f.table.DeniedCerts() {
		set[d.Serial] = struct{}{}
	}
	f.denied.Store(&set)
}
