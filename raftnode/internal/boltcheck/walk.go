package boltcheck

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

func (c *checker) mark(from, to uint64) {
	for id := from; id <= to; id++ {
		c.seen[id/64] |= 1 << (id % 64)
	}
}

func (c *checker) reached(id uint64) bool { return c.seen[id/64]&(1<<(id%64)) != 0 }

// buffer returns n bytes to read a page at depth into. A page's bytes are
// needed until its subtrees, one level deeper, have been checked, and no
// longer, so one buffer per level serves the whole walk.
func (c *checker) buffer(depth, n int) []byte {
	for len(c.bufs) <= depth {
		c.bufs = append(c.bufs, nil)
	}
	if cap(c.bufs[depth]) < n {
		c.bufs[depth] = append(c.bufs[depth][:cap(c.bufs[depth])], make([]byte, n-cap(c.bufs[depth]))...)
	}
	return c.bufs[depth][:n]
}

// page reads page id, at depth in the walk, with its overflow pages. It
// must lie within the file's pages, not have been reached before (bolt's
// Check: no page is referenced twice, so the walk cannot loop), name
// itself id and be of one of the types in want.
func (c *checker) page(id uint64, want uint16, depth int) ([]byte, error) {
	if id < 2 || id >= c.high {
		return nil, fmt.Errorf("a reference to page %d, outside pages 2 to %d", id, c.high-1)
	}
	if c.reached(id) {
		return nil, fmt.Errorf("page %d is referenced twice", id)
	}
	p := c.buffer(depth, c.ps)
	if _, err := c.f.ReadAt(p, int64(id)*int64(c.ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	over := uint64(ne.Uint32(p[12:]))
	switch {
	case ne.Uint64(p) != id:
		return nil, fmt.Errorf("page %d names itself page %d", id, ne.Uint64(p))
	case !oneOf(ne.Uint16(p[8:]), want):
		return nil, fmt.Errorf("page %d has type %#x, want one of %#x", id, ne.Uint16(p[8:]), want)
	case over >= c.high-id:
		return nil, fmt.Errorf("page %d runs %d pages past the last one", id, id+over-c.high+1)
	}
	for i := id + 1; i <= id+over; i++ {
		if c.reached(i) {
			return nil, fmt.Errorf("page %d is referenced twice", i)
		}
	}
	c.mark(id, id+over)
	c.pages += int(over) + 1
	if over > 0 {
		p = c.buffer(depth, (int(over)+1)*c.ps) // keeps the first page: buffer grows by appending
		if _, err := c.f.ReadAt(p[c.ps:], int64(id+1)*int64(c.ps)); err != nil {
			return nil, fmt.Errorf("page %d: %w", id, err)
		}
	}
	return p, nil
}

// freelist reads the freelist page at id and returns the pages it lists.
func (c *checker) freelist(id uint64) ([]uint64, error) {
	p, err := c.page(id, freelistPage, 0)
	if err != nil {
		return nil, err
	}
	n, ids := uint64(ne.Uint16(p[10:])), p[pageHeader:]
	if n == 0xffff { // the count did not fit: it is the first element
		n, ids = ne.Uint64(ids), ids[8:]
	}
	if n > uint64(len(ids)/8) {
		return nil, fmt.Errorf("freelist page %d lists %d pages, it has room for %d", id, n, len(ids)/8)
	}
	free := make([]uint64, n)
	for i := range free {
		free[i] = ne.Uint64(ids[8*i:])
	}
	return free, nil
}

// tree checks the B+tree of a bucket from page id, and the buckets below
// it, with bolt's Check's rules for keys: in order on each page, and
// within [lo, hi) given by the parent page. It returns (a copy of) the
// subtree's largest key. kv sees the bucket's keys and values in order.
func (c *checker) tree(id uint64, lo, hi []byte, depth int, kv func(k, v []byte) error) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("page %d is %d levels deep", id, depth)
	}
	p, err := c.page(id, branchPage|leafPage, depth)
	if err != nil {
		return nil, err
	}
	var last []byte
	if ne.Uint16(p[8:]) == branchPage {
		last, err = c.branch(id, p, lo, hi, depth, kv)
	} else {
		last, err = c.leaf(pageName{id: id}, p, lo, hi, depth, kv)
	}
	return bytes.Clone(last), err
}

// pageName names a page for errors: a page of the file, or the inline
// page of a bucket.
type pageName struct {
	id     uint64
	bucket []byte
}

func (n pageName) String() string {
	if n.bucket != nil {
		return fmt.Sprintf("the inline page of bucket %q", n.bucket)
	}
	return fmt.Sprintf("page %d", n.id)
}

// oneOf reports whether flags is exactly one of the bits in want, as a
// page's type must be.
func oneOf(flags, want uint16) bool { return flags != 0 && flags&(flags-1) == 0 && flags&want != 0 }

// branch checks a branch page's elements and the subtrees they point to.
func (c *checker) branch(id uint64, p, lo, hi []byte, depth int, kv func(k, v []byte) error) ([]byte, error) {
	n := int(ne.Uint16(p[10:]))
	if pageHeader+n*elemSize > len(p) {
		return nil, fmt.Errorf("page %d counts %d elements, it has room for %d", id, n, (len(p)-pageHeader)/elemSize)
	}
	keys := make([][]byte, n)
	for i := range keys {
		e := pageHeader + i*elemSize
		start, end := uint64(e)+uint64(ne.Uint32(p[e:])), uint64(e)+uint64(ne.Uint32(p[e:]))+uint64(ne.Uint32(p[e+4:]))
		if end > uint64(len(p)) {
			return nil, fmt.Errorf("page %d, element %d: its key lies past the page's end", id, i)
		}
		keys[i] = p[start:end]
	}
	var last []byte
	for i, k := range keys {
		if err := keyOrder(i, k, lo, hi); err != nil {
			return nil, fmt.Errorf("page %d, element %d: %w", id, i, err)
		}
		next := hi
		if i+1 < n {
			next = keys[i+1]
		}
		var err error
		if last, err = c.tree(ne.Uint64(p[pageHeader+i*elemSize+8:]), k, next, depth+1, kv); err != nil {
			return nil, err
		}
		lo = last
	}
	return last, nil
}

// leaf checks a leaf page's elements (where names the page for errors) and
// the buckets stored in them, and hands the others to kv.
func (c *checker) leaf(where pageName, p, lo, hi []byte, depth int, kv func(k, v []byte) error) ([]byte, error) {
	n := int(ne.Uint16(p[10:]))
	if pageHeader+n*elemSize > len(p) {
		return nil, fmt.Errorf("%v counts %d elements, it has room for %d", where, n, (len(p)-pageHeader)/elemSize)
	}
	var last []byte
	for i := range n {
		e := pageHeader + i*elemSize
		flags, ks, vs := ne.Uint32(p[e:]), uint64(ne.Uint32(p[e+8:])), uint64(ne.Uint32(p[e+12:]))
		start := uint64(e) + uint64(ne.Uint32(p[e+4:]))
		if start+ks+vs > uint64(len(p)) {
			return nil, fmt.Errorf("%v, element %d: its key and value lie past the page's end", where, i)
		}
		k, v := p[start:start+ks], p[start+ks:start+ks+vs]
		if err := keyOrder(i, k, lo, hi); err != nil {
			return nil, fmt.Errorf("%v, element %d: %w", where, i, err)
		}
		lo, last = k, k
		var err error
		if flags&bucketLeaf != 0 {
			err = c.bucket(k, v, depth)
		} else if kv != nil {
			err = kv(k, v)
		}
		if err != nil {
			return nil, err
		}
	}
	return last, nil
}

// keyOrder applies bolt's Check's rule to the i-th key of a page: the
// first may not sort before prev, the bound its parent page gives; the
// others must sort after prev, the key (or subtree) before them; and all
// before hi, where the parent page starts the next page.
func keyOrder(i int, k, prev, hi []byte) error {
	switch {
	case i == 0 && prev != nil && bytes.Compare(prev, k) > 0:
		return fmt.Errorf("key %x sorts before %x, where its parent page starts it", k, prev)
	case i > 0 && bytes.Compare(prev, k) >= 0:
		return fmt.Errorf("key %x does not sort after the key before it, %x", k, prev)
	case hi != nil && bytes.Compare(k, hi) >= 0:
		return fmt.Errorf("key %x does not sort before %x, where its parent page starts the next page", k, hi)
	}
	return nil
}

// bucket checks the bucket named name whose header is v: its tree, or
// its inline page.
func (c *checker) bucket(name, v []byte, depth int) error {
	if len(v) < bucketHeader {
		return fmt.Errorf("bucket %q: a header of %d bytes", name, len(v))
	}
	var kv func(k, v []byte) error
	if c.nested == 0 && string(name) == "logs" { // raft-boltdb's log
		kv = c.logKey
	}
	c.nested++
	defer func() { c.nested-- }()
	if root := ne.Uint64(v); root != 0 {
		_, err := c.tree(root, nil, nil, depth+1, kv)
		return err
	}
	inline := v[bucketHeader:]
	if len(inline) < pageHeader || ne.Uint16(inline[8:]) != leafPage {
		return fmt.Errorf("bucket %q: its inline page is not a leaf page", name)
	}
	_, err := c.leaf(pageName{bucket: name}, inline, nil, nil, depth+1, kv)
	return err
}

// logKey checks the keys of raft-boltdb's logs bucket: raft log indexes,
// 8 bytes big endian, with no gap (raft panics on an entry it needs and
// cannot get).
func (c *checker) logKey(k, _ []byte) error {
	if len(k) != 8 {
		return fmt.Errorf("the raft log holds a key of %d bytes", len(k))
	}
	i := binary.BigEndian.Uint64(k)
	if c.last != 0 && i != c.last+1 {
		return fmt.Errorf("the raft log skips from index %d to %d", c.last, i)
	}
	c.last = i
	return nil
}
