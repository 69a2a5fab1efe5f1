// Package boltcheck checks a raft-boltdb file (a node's raft.db) before
// bbolt opens it, so that a damaged file stops the node with an error
// instead of a crash.
//
// bbolt maps the file into memory and trusts it: a page past the end of a
// file cut short (a torn write, a disk that filled up) faults (SIGSEGV or
// SIGBUS) or reads as zeroes, and a damaged page trips an assertion, or
// the consistency check bbolt runs to rebuild its freelist, which panics
// in a goroutine of its own; each kills the process with a crash dump.
// Check reads the file with ReadAt instead and trusts nothing it reads. It
// applies the rules of bbolt's own Tx.Check: a valid meta page; every page
// within the file, naming itself, of the type its parent expects, reached
// once; keys in order on each page and within the bounds their parent
// page gives; a freelist that lists no page in use. And raft-boltdb's: the
// raft log's keys are 8-byte indexes with no gap (raft panics on an entry
// it needs and cannot get).
//
// It reads every page in use once, not the whole file: with
// NoFreelistSync, bbolt's open walks those same pages to rebuild its
// freelist (and would panic on what Check reports), so Check costs about
// what opening costs already, in proportion to the live log, not to the
// file, which never shrinks.
package boltcheck

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"go.etcd.io/bbolt"
)

// DamagedError is Check's error for a file that cannot be trusted, as
// opposed to one it could not read.
type DamagedError struct {
	Path string
	Err  error // what is wrong with it
}

func (e *DamagedError) Error() string { return e.Path + " is damaged: " + e.Err.Error() }
func (e *DamagedError) Unwrap() error { return e.Err }

// Check checks the bolt file at path and returns how many pages it read.
// A missing file passes (a new node); an empty one does not (bbolt would
// start a new empty log there, and the node forget its term and vote).
// Damage is reported as a *DamagedError; a file Check cannot read, or one
// another process holds, with an ordinary error.
func Check(path string) (pages int, err error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, err
	case info.Size() == 0:
		return 0, &DamagedError{path, errors.New("it is empty")}
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err // not a damaged file: one this process may not read, say
	}
	defer f.Close()
	// A shared lock, as bolt takes one, so that a file another process is
	// writing is reported as locked rather than damaged. Opening read-only
	// validates the meta pages and reads nothing else.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, bbolt.ErrTimeout) {
		return 0, fmt.Errorf("open %s: %w (is another process using the data dir?)", path, err)
	}
	if err != nil {
		return 0, &DamagedError{path, err}
	}
	defer db.Close()
	defer func() {
		if p := recover(); p != nil { // a bug in the check, not in the file; still better than a crash
			err = fmt.Errorf("checking %s panicked: %v", path, p)
		}
	}()
	c := checker{f: f}
	if err := c.check(info.Size()); err != nil {
		return c.pages, &DamagedError{path, err}
	}
	return c.pages, nil
}

// checker walks a bolt file through ReadAt.
type checker struct {
	f      io.ReaderAt
	ps     int      // page size
	high   uint64   // the high-water mark: pages [0, high) exist
	seen   []uint64 // bitmap of the pages reached
	pages  int      // pages read
	bufs   [][]byte // page buffers by depth (see buffer)
	nested int      // how many buckets the walk is inside, the root bucket not counted
	last   uint64   // the last raft log index met in the logs bucket
}

// check checks the file of size bytes: the meta page bolt will use, that
// the file holds every page it counts, and every page reachable from it.
func (c *checker) check(size int64) error {
	m, err := c.meta(size)
	if err != nil {
		return err
	}
	c.ps = int(m.pageSize)
	switch {
	case c.ps < 1024 || size%int64(c.ps) != 0:
		return fmt.Errorf("its %d bytes are not a whole number of %d-byte pages: it was cut short or extended", size, c.ps)
	case m.high < 2 || m.high > uint64(size)/uint64(c.ps):
		return fmt.Errorf("it holds %d pages of %d bytes, its header counts %d: it was cut short", size/int64(c.ps), c.ps, m.high)
	}
	c.high = m.high
	c.seen = make([]uint64, (m.high+63)/64)
	c.mark(0, 1) // the meta pages
	var freed []uint64
	if m.freelist != noFreelist {
		if freed, err = c.freelist(m.freelist); err != nil {
			return err
		}
	}
	if _, err := c.tree(m.root, nil, nil, 0, nil); err != nil {
		return err
	}
	// Bolt would hand out a free page that is in use, or twice.
	for _, id := range freed {
		if id < 2 || id >= c.high || c.reached(id) {
			return fmt.Errorf("the freelist holds page %d, which is in use, listed twice or out of bounds", id)
		}
		c.mark(id, id)
	}
	return nil
}
