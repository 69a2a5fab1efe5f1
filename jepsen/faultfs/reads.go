package faultfs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Read faults: what a read of a file returns while one lasts.
const (
	readsWork    = iota
	readsFail    // EIO
	readsCorrupt // the bytes asked for, one of them changed
)

// readFault is the read fault of a mirror and the inodes whose pages
// the kernel may cache, dropped at each change of fault so that a read
// reaches the mirror (and, once it ends, no changed byte stays cached).
type readFault struct {
	mode   atomic.Int32
	bad    atomic.Int64
	mu     sync.Mutex
	inodes map[*fs.Inode]bool
}

// opened keeps the inode of a file opened.
func (r *readFault) opened(in *fs.Inode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inodes == nil {
		r.inodes = map[*fs.Inode]bool{}
	}
	r.inodes[in] = true
}

// set starts (or ends, with readsWork) a read fault.
func (r *readFault) set(mode int32) {
	r.mode.Store(mode)
	r.mu.Lock()
	defer r.mu.Unlock()
	for in := range r.inodes {
		if in.NotifyContent(0, 0) == syscall.ENOENT { // forgotten by the kernel
			delete(r.inodes, in)
		}
	}
}

// FailReads makes every read of a file fail with EIO (on) or work.
func (f *FS) FailReads(on bool) { f.reads.set(map[bool]int32{true: readsFail}[on]) }

// CorruptReads makes every read of a file return the bytes asked for
// with one of them changed (on), or work.
func (f *FS) CorruptReads(on bool) { f.reads.set(map[bool]int32{true: readsCorrupt}[on]) }

// BadReads counts the reads failed or changed so far.
func (f *FS) BadReads() int64 { return f.reads.bad.Load() }

// Read fails or changes a byte while a read fault lasts.
func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	switch f.fs.reads.mode.Load() {
	case readsFail:
		f.fs.reads.bad.Add(1)
		return nil, syscall.EIO
	case readsCorrupt:
		n, err := unix.Pread(f.fd(), buf, off)
		if err != nil {
			return nil, fs.ToErrno(err)
		}
		if n > 0 {
			buf[n/2] ^= 0xff
			f.fs.reads.bad.Add(1)
		}
		return fuse.ReadResultData(buf[:n]), 0
	}
	return f.LoopbackFile.Read(ctx, buf, off)
}
