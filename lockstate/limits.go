package lockstate

// Limits caps what the table takes on. The leader stamps its configured
// limits into each CreateSession and Acquire it proposes, so that apply
// stays a function of the entry alone while operators may change the
// limits (restarting the leader with other flags). A zero field is no
// limit; an entry without Limits has none.
type Limits struct {
	Sessions        int `msgpack:"sessions,omitempty"`          // live sessions in the table
	HoldsPerSession int `msgpack:"holds_per_session,omitempty"` // names a session holds or waits for
	WaitersPerName  int `msgpack:"waiters_per_name,omitempty"`  // requests queued on one name
	Waiters         int `msgpack:"waiters,omitempty"`           // requests queued in the table
}

const maxLimitValue = 1 << 30

func (l *Limits) validate() *Error {
	if l == nil {
		return nil
	}
	for _, v := range [...]int{l.Sessions, l.HoldsPerSession, l.WaitersPerName, l.Waiters} {
		if v < 0 || v > maxLimitValue {
			return invalidf("limits must be in [0, %d]", maxLimitValue)
		}
	}
	return nil
}

// checkHolds refuses a request that would take session s past
// HoldsPerSession names held or waited for.
func (l *Limits) checkHolds(t *Table, s *session, specs []LockSpec) *Error {
	if l == nil || l.HoldsPerSession == 0 {
		return nil
	}
	count := len(s.holds)
	for _, r := range s.pending {
		count += len(r.specs)
	}
	for _, sp := range specs {
		if n := t.nodes[sp.Name]; n == nil || s.holds[n] == nil {
			count++
		}
	}
	if count > l.HoldsPerSession {
		return errorf(CodeLimit, "session %s would hold or wait for %d names, over its limit %d", s.publicKey(), count, l.HoldsPerSession)
	}
	return nil
}

// checkQueue refuses to queue r past Waiters or WaitersPerName.
func (l *Limits) checkQueue(t *Table, r *request) *Error {
	if l == nil {
		return nil
	}
	if l.Waiters > 0 && t.waiting >= l.Waiters {
		return errorf(CodeLimit, "%d requests wait in the cluster, its limit", t.waiting)
	}
	if l.WaitersPerName == 0 {
		return nil
	}
	for _, sp := range r.specs {
		if n := t.nodes[sp.Name]; n != nil && n.waiting != nil && n.queue().here.size >= l.WaitersPerName {
			return errorf(CodeLimit, "%d requests wait for %q, its limit", n.queue().here.size, sp.Name)
		}
	}
	return nil
}
