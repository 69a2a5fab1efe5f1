package faultfs

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// pageSize is the unit a torn write lands in.
const pageSize = 4096

// durability keeps apart what was written through the mirror since it
// was last made durable: the backing directory holds every write (the
// page cache), and an undo record of each change not yet fsynced lets
// PowerLoss bring it back to what a disk would hold after losing power.
// A file's contents are durable once the file is fsynced (fsync or
// fdatasync); a name created, renamed or removed once its directory is
// (names.go).
type durability struct {
	mu        sync.Mutex
	files     map[uint64]*unsynced // by the backing file's inode number
	names     []*nameChange        // in the order made
	dirs      map[uint64]*dirRef   // the directories of the changes in names, by inode number
	lost      []error              // changes to names that could not be recorded
	graveyard string               // where what was removed waits for its removal to be durable
	graveFd   int                  // an O_PATH descriptor of the graveyard
	seq       int                  // names what is in the graveyard
}

// unsynced are the changes to one file since its last fsync.
type unsynced struct {
	fd      int      // a duplicate of a descriptor of the file, kept until the fsync
	undo    []change // in the order made
	lastOff int64    // the last write: where
	last    []byte   // and what (nil if the last change was no write)
}

// change undoes one change to a file: write old at off, then cut the
// file to size.
type change struct {
	off  int64
	old  []byte
	size int64
}

// newDurability keeps what is removed in graveyard (emptied, or
// created), which must be on the backing directory's filesystem and
// outside it.
func newDurability(graveyard string) (*durability, error) {
	if err := os.RemoveAll(graveyard); err != nil { // what an earlier mirror left
		return nil, fmt.Errorf("faultfs: graveyard: %w", err)
	}
	if err := os.Mkdir(graveyard, 0o700); err != nil {
		return nil, fmt.Errorf("faultfs: graveyard: %w", err)
	}
	fd, err := unix.Open(graveyard, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("faultfs: graveyard: %w", err)
	}
	return &durability{files: map[uint64]*unsynced{}, dirs: map[uint64]*dirRef{}, graveyard: graveyard, graveFd: fd}, nil
}

// changing records the bytes [off, off+n) of the file open at fd and its
// size before a change to them, and the change's data if it is a write
// (nil otherwise). The caller holds d.mu.
func (d *durability) changing(fd int, off, n int64, data []byte) (*unsynced, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	u := d.files[st.Ino]
	if u == nil {
		dup, err := unix.Dup(fd)
		if err != nil {
			return nil, err
		}
		u = &unsynced{fd: dup}
		d.files[st.Ino] = u
	}
	c := change{off: off, size: st.Size}
	if end := min(off+n, st.Size); end > off {
		c.old = make([]byte, end-off)
		if _, err := unix.Pread(fd, c.old, off); err != nil {
			return nil, err
		}
	}
	u.undo = append(u.undo, c)
	u.lastOff, u.last = off, nil
	if data != nil {
		u.last = append([]byte(nil), data...)
	}
	return u, nil
}

// synced makes the file open at fd durable as it is now.
func (d *durability) synced(fd int) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if u := d.files[st.Ino]; u != nil {
		unix.Close(u.fd)
		delete(d.files, st.Ino)
	}
}

// Loss is what a power loss threw away.
type Loss struct {
	Files int // files whose unsynced changes were undone
	Names int // changes to directories undone
	Torn  int // files whose last write landed in part
}

// powerLoss undoes every change not made durable. With tear, the last
// write of each file that spans more than one page lands in part: a
// prefix of its pages, cut at random.
func (d *durability) powerLoss(tear *rand.Rand) (Loss, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var loss Loss
	var errs []error
	inos := make([]uint64, 0, len(d.files))
	for ino := range d.files {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] }) // the same tears for the same seed
	for _, ino := range inos {
		u := d.files[ino]
		torn, err := u.revert(tear)
		errs = append(errs, err)
		loss.Files++
		if torn {
			loss.Torn++
		}
		unix.Close(u.fd)
	}
	clear(d.files)
	names, err := d.undoNames()
	loss.Names = names
	return loss, errors.Join(append(errs, err)...)
}

// revert undoes u's changes, last first, and tears its last write if
// asked and it spans pages; it reports whether it tore.
func (u *unsynced) revert(tear *rand.Rand) (bool, error) {
	for i := len(u.undo) - 1; i >= 0; i-- {
		c := u.undo[i]
		if len(c.old) > 0 {
			if _, err := unix.Pwrite(u.fd, c.old, c.off); err != nil {
				return false, fmt.Errorf("faultfs: power loss: undo a write: %w", err)
			}
		}
		if err := unix.Ftruncate(u.fd, c.size); err != nil {
			return false, fmt.Errorf("faultfs: power loss: undo a size: %w", err)
		}
	}
	if tear == nil || u.last == nil {
		return false, nil
	}
	first := (u.lastOff/pageSize + 1) * pageSize // the first page boundary inside the write
	end := u.lastOff + int64(len(u.last))
	if first >= end {
		return false, nil
	}
	cuts := (end-first-1)/pageSize + 1 // boundaries strictly inside the write
	cut := first + tear.Int63n(cuts)*pageSize
	if _, err := unix.Pwrite(u.fd, u.last[:cut-u.lastOff], u.lastOff); err != nil {
		return false, fmt.Errorf("faultfs: power loss: tear a write: %w", err)
	}
	return true, nil
}

// close lets go of the files kept for a power loss: afterwards every
// write counts as durable.
func (d *durability) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, u := range d.files {
		unix.Close(u.fd)
	}
	clear(d.files)
	for _, c := range d.names {
		d.discard(c.kept)
	}
	clear(d.names)
	d.names, d.lost = nil, nil
	d.closeUnused()
	if d.graveFd >= 0 {
		unix.Close(d.graveFd)
		d.graveFd = -1
	}
}
