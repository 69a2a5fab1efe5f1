// Package faultfs serves one directory at another through FUSE, and
// fails every write with EIO while it is told to: a disk whose writes
// fail, under a node that keeps running. Reads go on working, as they do
// on a disk whose write path broke (a controller that lost its cache, a
// filesystem remounted after an error).
//
// It also keeps apart what was written since it was made durable
// (durable.go): PowerLoss throws away each file's writes since its last
// fsync and each name changed since its directory's (names.go: wherever
// the directory was renamed since), and may tear the last write of a
// file; and it can fail reads or change a byte of them (reads.go).
//
// The mirror is go-fuse's loopback filesystem; faultfs wraps its nodes
// and open files and answers EIO, before the backing directory is
// touched, to each call that would change it: write, fsync of a file,
// fallocate, truncate, create (O_TMPFILE too), mkdir, link, rename,
// unlink and the like. FUSE passthrough is refused for every file, so
// that the kernel sends each write here instead of straight to the
// backing file. Not refused: fsync of a directory (every change to one
// is) and ioctls that set a file's flags.
//
// A process that serves a mount must not use it: a page fault on a file
// of it that the process maps blocks a thread outside any system call,
// and a collection that stops the world then waits for that thread while
// the server goroutines that would answer the fault cannot run. lockjepsen
// serves the mounts its containers use (Mount). A process that uses a
// mirror itself, a test, has it served by a child process (StartChild,
// with Remote's methods: the program run again, which never touches the
// mount it serves); faultfstest mounts them so for tests, and cuts a mount
// that a test still waits on at the test's own deadline.
package faultfs

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted mirror whose writes can be made to fail.
type FS struct {
	mountpoint string // absolute, without symlinks: as the mount table names it
	// abort is this mount's abort file in fusectl, opened at Mount so
	// that a later abort cannot reach another mount given the same
	// connection number; nil where fusectl is not mounted.
	abort   *os.File
	conn    uint32 // the FUSE connection's number (the mount's device minor)
	server  *fuse.Server
	failing atomic.Bool
	failed  atomic.Int64
	dur     *durability
	reads   readFault
}

// Mount mirrors backing at mountpoint (both existing directories) until
// Unmount. Other users of the machine (root in a container, for one)
// may use the mount.
func Mount(backing, mountpoint string) (*FS, error) {
	// Resolved before the mount: afterwards resolving it would ask this
	// process's own server.
	mountpoint, err := realPath(mountpoint)
	if err != nil {
		return nil, err
	}
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("faultfs: mirror %s: %w", backing, err)
	}
	dur, err := newDurability(graveyardOf(backing))
	if err != nil {
		return nil, err
	}
	f := &FS{mountpoint: mountpoint, dur: dur}
	wrapped := &node{LoopbackNode: root.(*fs.LoopbackNode), fs: f}
	root.(*fs.LoopbackNode).RootData.RootNode = wrapped
	// The kernel caches no names or attributes: a power loss changes
	// them behind its back.
	var never time.Duration
	server, err := fs.Mount(mountpoint, wrapped, &fs.Options{EntryTimeout: &never, AttrTimeout: &never, NegativeTimeout: &never, MountOptions: fuse.MountOptions{
		AllowOther: true,
		FsName:     "lockd-faultfs",
		Name:       strings.TrimPrefix(fsType, "fuse."),
		// Without mount(8)'s helper, go-fuse mounts with mount(2), which
		// root may call; fusermount is then not needed.
		DirectMount: true,
	}})
	if err != nil {
		return nil, fmt.Errorf("faultfs: mount %s at %s: %w", backing, mountpoint, err)
	}
	f.server = server
	if f.conn, err = connOf(mountpoint); err == nil {
		f.abort = openAbort(f.conn)
	}
	return f, nil
}

// graveyardOf is where the mirror of backing keeps the files removed
// since their directory's last fsync: beside backing, on its filesystem
// (a removal is undone by a hard link).
func graveyardOf(backing string) string {
	backing = filepath.Clean(backing)
	return filepath.Join(filepath.Dir(backing), "."+filepath.Base(backing)+".faultfs-removed")
}

// PowerLoss throws away what was written through the mirror and not
// made durable, as a machine losing power would: each file's contents
// since its last fsync, each name created, renamed or removed since its
// directory's last fsync. With tear, the last write of each such file
// lands in part, a prefix of its pages cut at random. Nothing may be
// writing meanwhile: the node using the mirror is stopped first.
func (f *FS) PowerLoss(tear *rand.Rand) (Loss, error) {
	defer f.reads.set(f.reads.mode.Load()) // drop what the kernel caches of the lost writes
	return f.dur.powerLoss(tear)
}

// fsType is a mirror's type in the mount table.
const fsType = "fuse.faultfs"

// fusectl is where the kernel lists FUSE connections, if mounted.
const fusectl = "/sys/fs/fuse/connections"

// realPath is path absolute and without symlinks, as the mount table
// names a mount there.
func realPath(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return "", fmt.Errorf("faultfs: mountpoint: %w", err)
	}
	return real, nil
}

// connOf is the number of the FUSE connection of the mirror mounted on
// top at mountpoint (an absolute path without symlinks).
func connOf(mountpoint string) (uint32, error) {
	conn, typ, err := topMount(mountpoint)
	if err != nil {
		return 0, err
	}
	if typ != fsType {
		return 0, fmt.Errorf("faultfs: no mirror mounted at %s (on top: %q)", mountpoint, typ)
	}
	return conn, nil
}

// Mounted reports whether a mirror is mounted on top at dir, from the
// mount table: it never waits on the mount's server.
func Mounted(dir string) (bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, fmt.Errorf("faultfs: %w", err)
	}
	// The directory above is resolved, not dir: that would stat the
	// mount's root, which asks its server.
	parent, err := realPath(filepath.Dir(abs))
	if err != nil {
		return false, err
	}
	_, typ, err := topMount(filepath.Join(parent, filepath.Base(abs)))
	return typ == fsType, err
}

// topMount is the device minor and type of what is mounted on top at
// mountpoint (an absolute path without symlinks), typ "" if nothing is,
// read from the mount table rather than by a stat, which would wait on a
// FUSE mount's server (the caller may be that server, or a parent whose
// child hangs).
func topMount(mountpoint string) (minor uint32, typ string, err error) {
	table, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, "", fmt.Errorf("faultfs: mount table: %w", err)
	}
	for line := range strings.Lines(string(table)) {
		// ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [TAGS...] - TYPE SOURCE ...
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || sep+1 >= len(f) || unescapeMount(f[4]) != mountpoint {
			continue
		}
		_, dev, ok := strings.Cut(f[2], ":")
		n, err := strconv.ParseUint(dev, 10, 32)
		if !ok || err != nil {
			return 0, "", fmt.Errorf("faultfs: mount table: device %q at %s", f[2], mountpoint)
		}
		minor, typ = uint32(n), f[sep+1] // later lines are mounted later, on top
	}
	return minor, typ, nil
}

// unescapeMount undoes the mount table's escapes of a path (\040 for a
// space, \011, \012, \134).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// openAbort opens the abort file of FUSE connection conn; nil where
// there is none (fusectl not mounted, the connection gone).
func openAbort(conn uint32) *os.File {
	mountFusectl()
	f, err := os.OpenFile(filepath.Join(fusectl, strconv.FormatUint(uint64(conn), 10), "abort"), os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	return f
}

// mountFusectl mounts fusectl where a machine has not (systemd does):
// without it a hung mount cannot be aborted.
func mountFusectl() {
	const magic = 0x65735543 // FUSECTL_SUPER_MAGIC
	var st unix.Statfs_t
	if err := unix.Statfs(fusectl, &st); err != nil || st.Type == magic {
		return
	}
	_ = unix.Mount("fusectl", fusectl, "fusectl", 0, "")
}

// Unsynced counts the files written through the mirror since their last
// fsync, whose descriptors it keeps open for a power loss (0 once
// unmounted).
func (f *FS) Unsynced() int {
	f.dur.mu.Lock()
	defer f.dur.mu.Unlock()
	return len(f.dur.files)
}

// FailWrites makes every write fail with EIO (on) or pass (off).
func (f *FS) FailWrites(on bool) { f.failing.Store(on) }

// Failed counts the calls answered EIO so far.
func (f *FS) Failed() int64 { return f.failed.Load() }

// unmountWait bounds a clean unmount: go-fuse waits until the kernel
// lets go of the mount, which a file left open or another mount
// namespace holding it can put off for good.
const unmountWait = 5 * time.Second

// Unmount ends the mirror, and lets go of what it kept for a power loss.
// A mount still in use (a container that was
// not stopped, a file left open, another mount namespace) is cut: its
// users get ENOTCONN instead of waiting for good on a server that is
// gone (a process holding a file on a mount it serves would hang at exit
// otherwise).
func (f *FS) Unmount() error {
	done := make(chan error, 1)
	go func() { done <- f.server.Unmount() }()
	select {
	case err := <-done:
		if err == nil {
			f.release()
			return nil
		}
	case <-time.After(unmountWait):
	}
	return f.cut()
}

// cut ends the mount at once, however its users and its server are: it
// aborts the FUSE connection (a call waiting on the mount fails with
// ECONNABORTED, a later one with ENOTCONN), detaches the mount, and lets
// go of what was kept for a power loss.
func (f *FS) cut() error {
	defer f.release()
	if f.abort != nil { // writing fails once the connection is gone: it can reach no other mount
		_, _ = f.abort.Write([]byte("1"))
	}
	return detach(f.mountpoint, f.conn)
}

// release lets go of the abort file, and of the descriptors kept for a
// power loss, which would hold the backing filesystem busy.
func (f *FS) release() {
	f.dur.close()
	if f.abort != nil {
		f.abort.Close()
	}
}

// detach detaches the mirror mounted on top at mountpoint (an absolute
// path without symlinks) lazily, if it is the one of FUSE connection
// conn (any mirror if conn is 0, unknown: minors start at 1); it leaves
// another mount, or none, alone.
func detach(mountpoint string, conn uint32) error {
	top, typ, err := topMount(mountpoint)
	if err != nil {
		return err
	}
	if typ != fsType || (conn != 0 && top != conn) {
		return nil
	}
	if err := unix.Unmount(mountpoint, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("faultfs: detach %s: %w", mountpoint, err)
	}
	return nil
}

// refuse reports whether a write must fail now, and counts it if so.
func (f *FS) refuse() bool {
	if !f.failing.Load() {
		return false
	}
	f.failed.Add(1)
	return true
}

// node is a loopback node whose changing calls fail while f fails.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

// path is n's path in the backing directory.
func (n *node) path() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// created records name, made in n if errno is 0, as a change to n's
// names. The caller holds the durability lock.
func (n *node) created(name string, errno syscall.Errno) {
	if errno == 0 {
		n.fs.dur.created(n.path(), name)
	}
}

// WrapChild wraps every node the loopback creates, so the whole tree fails.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	l, ok := ops.(*fs.LoopbackNode)
	if !ok { // a go-fuse that makes other nodes would let their writes through
		panic(fmt.Sprintf("faultfs: the loopback made a %T, not a *fs.LoopbackNode", ops))
	}
	return &node{LoopbackNode: l, fs: n.fs}
}

// Open passes, for writing too (a truncating open reaches Setattr): a
// file fails at its first write, as on a disk. Its inode is kept, so
// that a read fault can drop what the kernel caches of it.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno == 0 {
		n.fs.reads.opened(n.EmbeddedInode())
	}
	return n.fs.wrapFile(fh), fuseFlags, errno
}

// OpendirHandle opens a directory whose fsync makes its names durable.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return fh, fuseFlags, errno
	}
	ds, ok := fh.(loopbackDir)
	if !ok { // a go-fuse whose directories are otherwise would lose their fsyncs
		panic(fmt.Sprintf("faultfs: the loopback opened a directory as a %T", fh))
	}
	var st unix.Stat_t
	if err := unix.Lstat(n.path(), &st); err != nil {
		ds.Releasedir(ctx, 0)
		return nil, 0, fs.ToErrno(err)
	}
	return &dir{loopbackDir: ds, fs: n.fs, ino: st.Ino}, fuseFlags, 0
}

// loopbackDir is what go-fuse's loopback directory handle does.
type loopbackDir interface {
	fs.DirStream
	fs.FileReleasedirer
	fs.FileSeekdirer
	fs.FileFsyncdirer
	fs.FileReaddirenter
	fs.FileIoctler
}

// dir is an open loopback directory.
type dir struct {
	loopbackDir
	fs  *FS
	ino uint64 // the backing directory's: it keeps it when renamed
}

// Fsyncdir makes the changes to the directory's names durable, whatever
// it is called now.
func (d *dir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	errno := d.loopbackDir.Fsyncdir(ctx, flags)
	if errno == 0 {
		d.fs.dur.dirSynced(d.ino)
	}
	return errno
}

// Tmpfile (open with O_TMPFILE) fails; otherwise its file is wrapped.
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.fs.refuse() {
		return nil, nil, 0, syscall.EIO
	}
	inode, fh, fuseFlags, errno := n.LoopbackNode.Tmpfile(ctx, flags, mode, out)
	return inode, n.fs.wrapFile(fh), fuseFlags, errno
}

// Create fails; otherwise its file is wrapped.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.fs.refuse() {
		return nil, nil, 0, syscall.EIO
	}
	n.fs.dur.mu.Lock()
	defer n.fs.dur.mu.Unlock()
	var st unix.Stat_t
	existed := unix.Lstat(filepath.Join(n.path(), name), &st) == nil
	inode, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if !existed {
		n.created(name, errno)
	}
	if errno == 0 {
		n.fs.reads.opened(inode)
	}
	return inode, n.fs.wrapFile(fh), fuseFlags, errno
}

// Mkdir fails while writes fail.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fs.refuse() {
		return nil, syscall.EIO
	}
	n.fs.dur.mu.Lock()
	defer n.fs.dur.mu.Unlock()
	inode, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	n.created(name, errno)
	return inode, errno
}

// Mknod fails while writes fail.
func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fs.refuse() {
		return nil, syscall.EIO
	}
	n.fs.dur.mu.Lock()
	defer n.fs.dur.mu.Unlock()
	inode, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	n.created(name, errno)
	return inode, errno
}

// Symlink fails while writes fail.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fs.refuse() {
		return nil, syscall.EIO
	}
	n.fs.dur.mu.Lock()
	defer n.fs.dur.mu.Unlock()
	inode, errno := n.LoopbackNode.Symlink(ctx, target, name, out)
	n.created(name, errno)
	return inode, errno
}

// Link fails while writes fail.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fs.refuse() {
		return nil, syscall.EIO
	}
	n.fs.dur.mu.Lock()
	defer n.fs.dur.mu.Unlock()
	inode, errno := n.LoopbackNode.Link(ctx, target, name, out)
	n.created(name, errno)
	return inode, errno
}

// Unlink fails while writes fail.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.fs.refuse() {
		return syscall.EIO
	}
	d := n.fs.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unlink(n.path(), name, func() syscall.Errno { return n.LoopbackNode.Unlink(ctx, name) })
}

// Rmdir fails while writes fail. The directory is not removed but moved
// aside, until its removal is durable.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.fs.refuse() {
		return syscall.EIO
	}
	d := n.fs.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rmdir(n.path(), name)
}

// Rename fails while writes fail.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if n.fs.refuse() {
		return syscall.EIO
	}
	to, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	d := n.fs.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rename(n.path(), name, to.path(), newName, flags, func() syscall.Errno {
		return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	})
}

// Setattr (truncate, chmod, chown, utimes) fails while writes fail.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.fs.refuse() {
		return syscall.EIO
	}
	if w, ok := f.(*file); ok { // the loopback sets attributes through its own files
		f = w.LoopbackFile
	}
	size, ok := in.GetSize()
	if !ok {
		return n.LoopbackNode.Setattr(ctx, f, in, out)
	}
	fd, err := unix.Open(n.path(), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return syscall.EIO
	}
	defer unix.Close(fd)
	d := n.fs.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.changing(fd, int64(size), math.MaxInt64-int64(size), nil); err != nil {
		return syscall.EIO
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// Setxattr fails while writes fail.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.fs.refuse() {
		return syscall.EIO
	}
	return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
}

// Removexattr fails while writes fail.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.fs.refuse() {
		return syscall.EIO
	}
	return n.LoopbackNode.Removexattr(ctx, attr)
}

// CopyFileRange fails while writes fail.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle,
	offOut, length, flags uint64) (uint32, syscall.Errno) {
	if n.fs.refuse() {
		return 0, syscall.EIO
	}
	w, ok := fhOut.(*file)
	if !ok {
		return 0, syscall.ENOTSUP
	}
	d := n.fs.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.changing(w.fd(), int64(offOut), int64(length), nil); err != nil {
		return 0, syscall.EIO
	}
	return n.LoopbackNode.CopyFileRange(ctx, unwrapFile(fhIn), offIn, out, unwrapFile(fhOut), offOut, length, flags)
}

// file is an open loopback file whose writes fail while fs fails.
type file struct {
	*fs.LoopbackFile
	fs *FS
}

// wrapFile wraps a loopback file handle; other handles pass unchanged.
func (f *FS) wrapFile(fh fs.FileHandle) fs.FileHandle {
	if l, ok := fh.(*fs.LoopbackFile); ok {
		return &file{LoopbackFile: l, fs: f}
	}
	return fh
}

// unwrapFile returns the loopback file under fh, for the loopback's own
// calls that expect one.
func unwrapFile(fh fs.FileHandle) fs.FileHandle {
	if w, ok := fh.(*file); ok {
		return w.LoopbackFile
	}
	return fh
}

// PassthroughFd refuses FUSE passthrough: with it the kernel would write
// to the backing file without asking faultfs.
func (f *file) PassthroughFd() (int, bool) { return 0, false }

// Write fails while writes fail.
func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if f.fs.refuse() {
		return 0, syscall.EIO
	}
	d := f.fs.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.changing(f.fd(), off, int64(len(data)), data); err != nil {
		return 0, syscall.EIO
	}
	return f.LoopbackFile.Write(ctx, data, off)
}

// Writev fails while writes fail.
func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	if f.fs.refuse() {
		return 0, syscall.EIO
	}
	d := f.fs.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	joined := bytes.Join(data, nil)
	if _, err := d.changing(f.fd(), off, int64(len(joined)), joined); err != nil {
		return 0, syscall.EIO
	}
	return f.LoopbackFile.Writev(ctx, data, off)
}

// Fsync fails while writes fail: what was written may not be durable.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if f.fs.refuse() {
		return syscall.EIO
	}
	errno := f.LoopbackFile.Fsync(ctx, flags)
	if errno == 0 {
		f.fs.dur.synced(f.fd())
	}
	return errno
}

// Allocate fails while writes fail.
func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if f.fs.refuse() {
		return syscall.EIO
	}
	d := f.fs.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.changing(f.fd(), int64(off), int64(size), nil); err != nil {
		return syscall.EIO
	}
	return f.LoopbackFile.Allocate(ctx, off, size, mode)
}

// fd is the backing file's descriptor.
func (f *file) fd() int {
	fd, _ := f.LoopbackFile.PassthroughFd()
	return fd
}
