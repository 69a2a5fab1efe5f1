package lockstate

// requestIndex finds the table's requests by id. An id names at most one
// request of a session; requests of different sessions share one when an
// acquire scoped its id to its session (Acquire.SessionScoped). Those are
// chained through request.sameID in arrival order, the oldest in byID, so
// that the common case, an id only one session uses, costs one map entry
// and no allocation.
type requestIndex struct {
	byID   map[string]*request // the oldest request with each id
	n      int                 // requests indexed
	shared int                 // requests indexed behind an older one with the same id
}

func newRequestIndex(size int) requestIndex {
	return requestIndex{byID: make(map[string]*request, size)}
}

// of returns s's request with id, or nil.
func (x *requestIndex) of(s *session, id string) *request {
	for r := x.byID[id]; r != nil; r = r.sameID {
		if r.s == s {
			return r
		}
	}
	return nil
}

// withID returns the oldest request with id, nil for none; the others
// follow it through sameID.
func (x *requestIndex) withID(id string) *request { return x.byID[id] }

// has reports whether r is indexed.
func (x *requestIndex) has(r *request) bool { return x.of(r.s, r.id) == r }

// add indexes r, whose session has no other request with its id. A chain
// keeps the order of its adds, which no answer depends on.
func (x *requestIndex) add(r *request) {
	x.n++
	last := x.byID[r.id]
	if last == nil {
		x.byID[r.id] = r
		return
	}
	for last.sameID != nil {
		last = last.sameID
	}
	last.sameID = r
	x.shared++
}

// remove drops r from the index if it is there.
func (x *requestIndex) remove(r *request) {
	head := x.byID[r.id]
	switch {
	case head == r && r.sameID == nil:
		delete(x.byID, r.id)
	case head == r:
		x.byID[r.id] = r.sameID
		x.shared--
	default:
		p := head
		for p != nil && p.sameID != r {
			p = p.sameID
		}
		if p == nil {
			return // not indexed
		}
		p.sameID = r.sameID
		x.shared--
	}
	r.sameID = nil
	x.n--
}

// all returns every indexed request, in no particular order.
func (x *requestIndex) all() []*request {
	out := make([]*request, 0, x.n)
	for _, r := range x.byID {
		for ; r != nil; r = r.sameID {
			out = append(out, r)
		}
	}
	return out
}

// findRequest resolves request id for the token auth, the rule of Cancel
// and of every read by id (FindRequest): among the requests with that id
// (only session's when session is not 0), the one whose session auth may
// act through (authorize: its own, or any for a management token or
// without ACLs). Another token's request is not found, the very answer of
// an unused id, so that trying ids tells nothing of other tokens' requests
// and they never stand in the way; two that auth may act through are
// invalid_request, as the caller must say which session it means. In a
// table where no two requests share an id (every log before
// FormatSessionRequestIDs) it answers as the lookup of the single request
// by id always did.
func (t *Table) findRequest(auth string, session SessionID, id string) (*request, *Error) {
	var found *request
	for r := t.requests.withID(id); r != nil; r = r.sameID {
		if session != 0 && r.s.id != session {
			continue
		}
		if err := t.authorize(auth, r.s, AccessWrite); err != nil {
			if err.Code == CodeNoSession { // another token's: as if it did not exist
				continue
			}
			return nil, err
		}
		if found != nil {
			return nil, errorf(CodeInvalid, "request_id %q is used by more than one of your sessions: give the session", id)
		}
		found = r
	}
	if found == nil {
		return nil, errorf(CodeNoRequest, "request %q not found", id)
	}
	return found, nil
}

// FindRequest returns the request id names for the token auth ("" without
// ACLs), narrowed to session unless it is 0, by the rule Cancel applies:
// a request of a session auth may act through (its own, or any for a
// management token); none is a request_not_found refusal, whether the id
// is unused or another token's, and more than one an invalid_request
// asking for the session.
func (t *Table) FindRequest(auth string, session SessionID, id string) (RequestInfo, *Error) {
	r, err := t.findRequest(auth, session, id)
	if err != nil {
		return RequestInfo{}, err
	}
	return *t.requestInfo(r), nil
}

// SharesRequestIDs reports whether requests of two sessions share an id,
// which only tables since FormatSessionRequestIDs can hold (fsm writes
// such a table's snapshot in a format older builds refuse).
func (t *Table) SharesRequestIDs() bool { return t.requests.shared > 0 }
