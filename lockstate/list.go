package lockstate

// A waiter is one constituent of a pending request, queued on its node.
type waiter struct {
	req     *request
	spec    int // index into req.specs
	n       *node
	mode    Mode
	upgrade bool    // the session held n when it queued: waits only for holders
	elems   []*elem // its places in the node's and ancestors' lists
}

// elem is a waiter's place in one waitList.
type elem struct {
	w          *waiter
	prev, next *elem
	list       *waitList
}

// waitList is an intrusive list of waiters in arrival order. Waiters are only
// ever appended with a larger seq than every one already present, so the
// head is always the earliest waiter.
type waitList struct {
	head, tail *elem
	size       int
}

func (l *waitList) push(w *waiter) {
	e := &elem{w: w, prev: l.tail, list: l}
	if l.tail == nil {
		l.head = e
	} else {
		l.tail.next = e
	}
	l.tail = e
	l.size++
	w.elems = append(w.elems, e)
}

func (l *waitList) remove(e *elem) {
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
	l.size--
}

// earlier reports whether the list holds a waiter that arrived before seq
// and conflicts with mode. all lists every waiter, writes only the write
// waiters of the same place, so this is O(1).
func earlier(all, writes *waitList, mode Mode, seq uint64) bool {
	l := writes
	if mode == Write {
		l = all
	}
	return l.head != nil && l.head.w.req.seq < seq
}
