package faultfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Names. A change to a directory's names — create, link, mknod, symlink,
// mkdir, unlink, rmdir, rename — is durable once every directory it
// changed was fsynced after it: both parents of a rename across
// directories. A power loss undoes the others, last first.
//
// Directories are known by identity, not by path: while a change made in
// one is not durable the mirror holds it open (dirRef), and undoes the
// change through that descriptor, wherever the directory was renamed
// since (raft writes a snapshot's files in <id>.tmp, then renames it
// <id>). An fsync of a directory makes the changes to its own entries
// durable, under whatever name it has now; its own name is its parent's.
//
// Nothing removed through the mirror is freed before its removal is
// durable: a removed file keeps a hard link in the graveyard, a removed
// directory is moved there (rmdir is a rename into the graveyard), so
// that a power loss puts back the same file, with its durable contents,
// and a directory like it (revive), whose entries come back as the
// removals inside it are undone in turn (an os.RemoveAll comes back
// whole). Once the removal of a directory is durable, the directory is
// gone for good: the changes still pending in it are moot, and count as
// durable.
//
// An undo looks before it acts: a change whose names were taken over
// since by a change made durable (which only a rename across directories,
// one of them not fsynced, allows) counts as durable, and is left alone.

// dirRef is a directory in which changes were made that are not all
// durable.
type dirRef struct {
	fd  int // an O_PATH descriptor of it
	ino uint64
}

// nameChange is one change to names.
type nameChange struct {
	dirs    []*dirRef    // the directories it changed
	pending []*dirRef    // those not fsynced since
	undo    func() error // puts the names back as they were before it
	kept    *kept        // what it removed, nil if nothing
}

// kept is a file or directory that a change removed, kept in the
// graveyard until its removal is durable.
type kept struct {
	name  string  // in the graveyard
	isDir bool    // moved there, not linked
	dir   *dirRef // the removed directory, if changes are pending in it
}

// dirAt is the directory at path, as a dirRef. The caller holds d.mu.
func (d *durability) dirAt(path string) (*dirRef, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, err
	}
	if r := d.dirs[st.Ino]; r != nil {
		return r, nil
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	r := &dirRef{fd: fd, ino: st.Ino}
	d.dirs[st.Ino] = r
	return r, nil
}

// statAt is the entry name of dir, not followed if a symlink; ok is
// false if there is none.
func statAt(dir *dirRef, name string) (st unix.Stat_t, ok bool, err error) {
	err = unix.Fstatat(dir.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	return st, err == nil, err
}

func isDir(st unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// record adds a change of dirs. The caller holds d.mu.
func (d *durability) record(undo func() error, k *kept, dirs ...*dirRef) {
	dirs = slices.Compact(dirs) // a rename within one directory changed it once
	d.names = append(d.names, &nameChange{dirs: dirs, pending: slices.Clone(dirs), undo: undo, kept: k})
}

// untracked notes a change of names that could not be recorded, which a
// power loss then cannot undo: the power loss reports it. The caller
// holds d.mu.
func (d *durability) untracked(what string, err error) {
	d.lost = append(d.lost, fmt.Errorf("%s: %w", what, err))
}

// doUntracked makes a change with do that cannot be recorded (err says
// why), and notes it if do made it. The caller holds d.mu.
func (d *durability) doUntracked(what string, err error, do func() syscall.Errno) syscall.Errno {
	errno := do()
	if err != nil && errno == 0 {
		d.untracked(what, err)
	}
	return errno
}

// created records name, just made in the directory at dir, as a change
// a power loss undoes by removing it. The caller holds d.mu.
func (d *durability) created(dir, name string) {
	parent, err := d.dirAt(dir)
	var st unix.Stat_t
	if err == nil {
		st, _, err = statAt(parent, name)
	}
	if err != nil {
		d.untracked("create "+filepath.Join(dir, name), err)
		return
	}
	d.record(func() error { return d.unmake(parent, name, st.Ino) }, nil, parent)
}

// unlink removes the file name from the directory at dir with do (the
// loopback's unlink), keeping it for a power loss. The caller holds d.mu.
func (d *durability) unlink(dir, name string, do func() syscall.Errno) syscall.Errno {
	parent, err := d.dirAt(dir)
	var st unix.Stat_t
	var ok bool
	if err == nil {
		st, ok, err = statAt(parent, name)
	}
	what := "unlink " + filepath.Join(dir, name)
	if err != nil || !ok || isDir(st) { // do fails, or cannot be tracked
		return d.doUntracked(what, err, do)
	}
	k, err := d.keep(parent, name, st)
	if err != nil {
		return d.doUntracked(what, err, do)
	}
	if errno := do(); errno != 0 {
		d.discard(k)
		return errno
	}
	d.record(func() error { return d.restore(parent, name, k) }, k, parent)
	return 0
}

// rmdir removes the empty directory name from the directory at dir: it
// moves it into the graveyard, from which a power loss can bring it back
// as it was. The caller holds d.mu.
func (d *durability) rmdir(dir, name string) syscall.Errno {
	parent, err := d.dirAt(dir)
	if err != nil {
		path := filepath.Join(dir, name)
		return d.doUntracked("rmdir "+path, err, func() syscall.Errno { return toErrno(unix.Rmdir(path)) })
	}
	st, ok, err := statAt(parent, name)
	switch {
	case err != nil:
		return toErrno(err)
	case !ok:
		return syscall.ENOENT
	case !isDir(st):
		return syscall.ENOTDIR
	}
	if errno := emptyDir(parent, name); errno != 0 {
		return errno
	}
	k, err := d.keep(parent, name, st)
	if err != nil {
		return toErrno(err)
	}
	d.record(func() error { return d.restore(parent, name, k) }, k, parent)
	return 0
}

// rename renames name in the directory at from to newName in the one at
// to with do (the loopback's rename, with its flags), keeping what
// newName replaces for a power loss. The caller holds d.mu.
func (d *durability) rename(from, name, to, newName string, flags uint32, do func() syscall.Errno) syscall.Errno {
	what := "rename " + filepath.Join(from, name) + " to " + filepath.Join(to, newName)
	var dst *dirRef
	src, err := d.dirAt(from)
	if err == nil {
		dst, err = d.dirAt(to)
	}
	var old, over unix.Stat_t
	var exists, replaces bool
	if err == nil {
		old, exists, err = statAt(src, name)
	}
	if err == nil {
		over, replaces, err = statAt(dst, newName)
	}
	if err != nil || !exists { // do fails, or cannot be tracked
		return d.doUntracked(what, err, do)
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		if errno := do(); errno != 0 {
			return errno
		}
		d.record(func() error { return exchangeBack(src, name, dst, newName, old.Ino, over.Ino) }, nil, src, dst)
		return 0
	}
	var k *kept
	if replaces && old.Ino != over.Ino && flags&unix.RENAME_NOREPLACE == 0 && isDir(old) == isDir(over) {
		if isDir(over) {
			if errno := emptyDir(dst, newName); errno != 0 {
				return errno
			}
		}
		if k, err = d.keep(dst, newName, over); err != nil {
			return d.doUntracked(what, err, do)
		}
	}
	if errno := do(); errno != 0 {
		if k != nil {
			d.unkeep(dst, newName, k)
		}
		return errno
	}
	d.record(func() error { return d.renameBack(src, name, dst, newName, old.Ino, k) }, k, src, dst)
	return 0
}

// emptyDir is 0 if the directory name in dir is empty, ENOTEMPTY if not.
func emptyDir(dir *dirRef, name string) syscall.Errno {
	fd, err := unix.Openat(dir.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return toErrno(err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return syscall.ENOTEMPTY
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return toErrno(err)
	}
	return 0
}

// keep keeps the entry name of dir, st, in the graveyard before it is
// removed: a file by a hard link, a directory by moving it there (which
// removes it). The caller holds d.mu.
func (d *durability) keep(dir *dirRef, name string, st unix.Stat_t) (*kept, error) {
	k := &kept{name: d.graveName(), isDir: isDir(st)}
	if !k.isDir {
		return k, unix.Linkat(dir.fd, name, d.graveFd, k.name, 0)
	}
	k.dir = d.dirs[st.Ino]
	return k, unix.Renameat(dir.fd, name, d.graveFd, k.name)
}

// graveName is a new name in the graveyard. The caller holds d.mu.
func (d *durability) graveName() string {
	d.seq++
	return strconv.Itoa(d.seq)
}

// unkeep undoes keep where the removal then failed.
func (d *durability) unkeep(dir *dirRef, name string, k *kept) {
	if k.isDir {
		_ = unix.Renameat(d.graveFd, k.name, dir.fd, name)
	}
	d.discard(k)
}

// discard frees what k kept (nothing if it was put back).
func (d *durability) discard(k *kept) {
	if k != nil {
		_ = os.RemoveAll(filepath.Join(d.graveyard, k.name))
	}
}

// unmake undoes the making of name in dir, the inode ino: it removes it,
// with whatever it holds if a directory (entries made durable by its own
// fsync are lost with it). A name that is gone or another inode now was
// taken over by a durable change: it stays.
func (d *durability) unmake(dir *dirRef, name string, ino uint64) error {
	st, ok, err := statAt(dir, name)
	if err != nil || !ok || st.Ino != ino {
		return err
	}
	if !isDir(st) {
		return unix.Unlinkat(dir.fd, name, 0)
	}
	grave := d.graveName()
	if err := unix.Renameat(dir.fd, name, d.graveFd, grave); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(d.graveyard, grave))
}

// restore puts what k kept back at name in dir, unless a durable change
// took the name since.
func (d *durability) restore(dir *dirRef, name string, k *kept) error {
	if _, ok, err := statAt(dir, name); err != nil || ok {
		return err
	}
	if k.isDir {
		return d.revive(dir, name, k)
	}
	return unix.Linkat(d.graveFd, k.name, dir.fd, name, 0)
}

// revive puts the directory k kept back at name in dir as a new
// directory, with its mode, owner and times, and moves its dirRef there:
// the changes pending in it undo in the new one. Not the same inode: the
// kernel marks a removed directory's inode dead, refusing lookups in it,
// and while it still holds that inode (a release of it not yet answered)
// it would take the same inode number back as that dead inode. The
// directory was empty when removed, and its entries since come back
// through the undo of the changes made in it before.
func (d *durability) revive(dir *dirRef, name string, k *kept) error {
	var st unix.Stat_t
	if err := unix.Fstatat(d.graveFd, k.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	perm := st.Mode & 0o7777
	if err := unix.Mkdirat(dir.fd, name, perm); err != nil {
		return err
	}
	fd, err := unix.Openat(dir.fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	var now unix.Stat_t
	err = errors.Join(unix.Fchownat(dir.fd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW),
		unix.Fchmodat(dir.fd, name, perm, 0), // mkdir took the umask off
		unix.UtimesNanoAt(dir.fd, name, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW),
		unix.Fstat(fd, &now))
	if err != nil || k.dir == nil {
		unix.Close(fd)
		return err
	}
	delete(d.dirs, k.dir.ino)
	unix.Close(k.dir.fd)
	k.dir.fd, k.dir.ino = fd, now.Ino
	d.dirs[now.Ino] = k.dir
	return nil
}

// renameBack undoes a rename of the inode ino from name in src to
// newName in dst, which replaced what k kept (nil: nothing), unless a
// durable change took either name since.
func (d *durability) renameBack(src *dirRef, name string, dst *dirRef, newName string, ino uint64, k *kept) error {
	st, ok, err := statAt(dst, newName)
	if err != nil || !ok || st.Ino != ino {
		return err
	}
	if _, ok, err := statAt(src, name); err != nil || ok {
		return err
	}
	if err := unix.Renameat2(dst.fd, newName, src.fd, name, unix.RENAME_NOREPLACE); err != nil {
		return err
	}
	if k == nil {
		return nil
	}
	return d.restore(dst, newName, k)
}

// exchangeBack undoes an exchange of name in src, the inode a, with
// newName in dst, the inode b, unless a durable change took either name
// since.
func exchangeBack(src *dirRef, name string, dst *dirRef, newName string, a, b uint64) error {
	stA, okA, err := statAt(dst, newName)
	if err != nil {
		return err
	}
	stB, okB, err := statAt(src, name)
	if err != nil || !okA || !okB || stA.Ino != a || stB.Ino != b {
		return err
	}
	return unix.Renameat2(dst.fd, newName, src.fd, name, unix.RENAME_EXCHANGE)
}

// dirSynced makes durable the changes to the names of the directory
// whose inode is ino: each once every directory it changed is fsynced.
func (d *durability) dirSynced(ino uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.dirs[ino]
	if r == nil {
		return
	}
	for _, c := range d.names {
		c.pending = slices.DeleteFunc(c.pending, func(p *dirRef) bool { return p == r })
	}
	d.settle()
}

// settle drops the changes that are durable, and the changes pending in a
// directory whose removal is: it is gone for good. It frees what they
// kept, and lets go of the directories no change needs. The caller holds
// d.mu.
func (d *durability) settle() {
	gone := map[*dirRef]bool{}
	for more := true; more; {
		more = false
		left := d.names[:0]
		for _, c := range d.names {
			if len(c.pending) > 0 && !slices.ContainsFunc(c.pending, func(r *dirRef) bool { return gone[r] }) {
				left = append(left, c)
				continue
			}
			if c.kept != nil && c.kept.dir != nil {
				gone[c.kept.dir], more = true, true
			}
			d.discard(c.kept)
		}
		clear(d.names[len(left):])
		d.names = left
	}
	d.closeUnused()
}

// closeUnused lets go of the directories no change needs. The caller
// holds d.mu.
func (d *durability) closeUnused() {
	used := map[*dirRef]bool{}
	for _, c := range d.names {
		for _, r := range c.dirs {
			used[r] = true
		}
		if c.kept != nil && c.kept.dir != nil { // revive may move it
			used[c.kept.dir] = true
		}
	}
	for ino, r := range d.dirs {
		if !used[r] {
			unix.Close(r.fd)
			delete(d.dirs, ino)
		}
	}
}

// undoNames undoes every change to names not durable, last first, and
// lets go of what they kept. The caller holds d.mu.
func (d *durability) undoNames() (int, error) {
	var errs []error
	n := len(d.names)
	for i := n - 1; i >= 0; i-- {
		c := d.names[i]
		if err := c.undo(); err != nil {
			errs = append(errs, fmt.Errorf("faultfs: power loss: %w", err))
		}
		d.discard(c.kept)
	}
	clear(d.names)
	d.names = d.names[:0]
	if len(d.lost) > 0 {
		errs = append(errs, fmt.Errorf("faultfs: power loss: %d changes to names were not tracked and stay: %w", len(d.lost), errors.Join(d.lost...)))
		d.lost = nil
	}
	d.closeUnused()
	return n, errors.Join(errs...)
}

// toErrno is err as an errno, EIO if it has none.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}
