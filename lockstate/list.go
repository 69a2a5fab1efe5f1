package lockstate

// A waiter is one constituent of a pending request, queued on its node.
type waiter struct {
	req   *request
	i     int // index into req.specs
	n     *node
	mode  Mode
	upg   bool    // the session held n when it queued: waits only for holders
	elems []*elem // its places in the node's and ancestors' lists
}

// elem is a waiter's place in one wlist.
type elem struct {
	w          *waiter
	prev, next *elem
	list       *wlist
}

// wlist is an intrusive list of waiters in arrival order. Waiters are only
// ever appended with a larger seq than every one already present, so the
// head is always the earliest waiter.
type wlist struct {
	head, tail *elem
	n          int
}

func (l *wlist) push(w *waiter) {
	e := &elem{w: w, prev: l.tail, list: l}
	if l.tail == nil {
		l.head = e
	} else {
		l.tail.next = e
	}
	l.tail = e
	l.n++
	w.elems = append(w.elems, e)
}

func (l *wlist) remove(e *elem) {
	if e.prev == nil {
		l.head = e.next
	} else {
		e.prev.next = e.next
	}
	if e.next == nil {
		l.tail = e.prev
	} else {
		e.next.prev = e.prev
	}
	e.prev, e.next, e.list = nil, nil, nil
	l.n--
}

// earlier reports whether the list holds a waiter that arrived before seq
// and conflicts with mode m. all lists every waiter, writes only the write
// waiters of the same place, so this is O(1).
func earlier(all, writes *wlist, m Mode, seq uint64) bool {
	l := writes
	if m == Write {
		l = all
	}
	return l.head != nil && l.head.w.req.seq < seq
}
