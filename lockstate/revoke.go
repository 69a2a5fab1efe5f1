package lockstate

// Revoke releases every hold on one name at once, whoever holds it: an
// operator's way out when a holder is stuck but its session lives on. The
// holders' tokens stop being valid (Check), the waiters are granted in
// their order, and each holder's session remembers what it lost
// (SessionInfo.Revoked) so that its client learns it on its next
// keepalive or look at the session.
type Revoke struct {
	Name      string `msgpack:"name"`
	Authority        // needs admin on Name
}

// Revocation is one hold an operator revoked.
type Revocation struct {
	Name  string `msgpack:"name" json:"name"`
	Token uint64 `msgpack:"token" json:"token"` // the hold's fencing token, now invalid
	Index uint64 `msgpack:"index" json:"index"` // the Revoke entry
}

// Validate checks the name and token id.
func (c *Revoke) Validate() *Error {
	if err := validAuth(c.Auth); err != nil {
		return err
	}
	return ValidName(c.Name)
}

// apply drops the name's holds in grant order; each is an EvRevoked event.
// A name nobody holds is no error: there is nothing left to revoke.
func (c *Revoke) apply(t *Table) Result {
	if err := t.authorize(c.Auth, nil, AccessAdmin, c.Name); err != nil {
		return Result{Err: err}
	}
	n := t.nodes[c.Name]
	if n == nil {
		return Result{}
	}
	for _, h := range append([]*hold(nil), n.holds...) {
		s := h.s
		s.revoked = append(s.revoked, Revocation{Name: n.name, Token: h.token, Index: t.index})
		if len(s.revoked) > RevocationsKept {
			s.revoked = append(s.revoked[:0], s.revoked[len(s.revoked)-RevocationsKept:]...)
		}
		t.dropHold(h, EvRevoked)
	}
	return Result{}
}
