package lockstate

// Proclaim replaces the value of a hold its session has, keeping the hold
// and its fencing token: how an elected leader tells the others where to
// reach it now (etcd's Election.Proclaim). The name's version moves, so
// blocking queries on it wake. A proclaim that sets the value the hold
// already has changes nothing: repeating one is harmless.
type Proclaim struct {
	Session SessionID `msgpack:"session"`
	Name    string    `msgpack:"name"`
	Value   string    `msgpack:"value,omitempty"` // "" clears the value
	// Token, when set, is the fencing token the holder believes its hold
	// has: a hold with another token (the session lost the name and won
	// it again, or upgraded it) is not_held, as etcd's Proclaim refuses a
	// leader key of another revision.
	Token uint64 `msgpack:"token,omitempty"`
	Authority
}

// Proclamation is the hold a Proclaim left: its name, its fencing token
// (unchanged), its value, and the name's version after the entry.
type Proclamation struct {
	Name    string `msgpack:"name"`
	Token   uint64 `msgpack:"token"`
	Value   string `msgpack:"value,omitempty"`
	Version uint64 `msgpack:"version"`
}

// Validate checks the session, the name and the value (the rules of
// LockSpec.Value).
func (c *Proclaim) Validate() *Error {
	if err := requireSession(c.Session); err != nil {
		return err
	}
	if err := validAuth(c.Auth); err != nil {
		return err
	}
	if err := ValidName(c.Name); err != nil {
		return err
	}
	if p := valueProblem(c.Value); p != "" {
		return invalidf("value %s", p)
	}
	return nil
}

// apply sets the value of the session's hold on Name. Only a hold the
// session has now counts: one that was released, expired or revoked is
// not_held and stays gone.
func (c *Proclaim) apply(t *Table) Result {
	s, h, err := t.heldBy(c.Session, c.Auth, c.Name)
	if err != nil {
		return Result{Err: err}
	}
	if c.Token != 0 && h.token != c.Token {
		return Result{Err: errorf(CodeNotHeld, "session %s holds %q with token %d, not %d", s.publicKey(), c.Name, h.token, c.Token)}
	}
	if h.value != c.Value {
		h.value = c.Value
		t.touch(h.n)
		t.emit(EvProclaimed, s, "", h.n.name, h.token)
	}
	return Result{Proclaimed: &Proclamation{Name: h.n.name, Token: h.token, Value: h.value, Version: h.n.version}}
}
