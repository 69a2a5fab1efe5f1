package faultfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/lockd/lockd/jepsen/faultfs/faultfstest"
)

// TestMain lets each test's mirror be served by this test binary run
// again (faultfstest.Mount), never by the process using it.
func TestMain(m *testing.M) { faultfstest.Main(m) }

func TestWritesFailOnlyWhileTold(t *testing.T) {
	f, dir := faultfstest.MountTemp(t)
	path := filepath.Join(dir, "log")
	file, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt([]byte("before"), 0); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}

	f.FailWrites(true)
	calls := []struct {
		name string
		call func() error
	}{
		{"write", func() error { _, err := file.WriteAt([]byte("during"), 0); return err }},
		{"fsync", file.Sync},
		{"truncate", func() error { return file.Truncate(0) }},
		{"create", func() error {
			f, err := os.Create(filepath.Join(dir, "new"))
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(dir, "sub"), 0o700) }},
		{"rename", func() error { return os.Rename(path, filepath.Join(dir, "moved")) }},
		{"remove", func() error { return os.Remove(path) }},
		{"fallocate", func() error { return unix.Fallocate(int(file.Fd()), 0, 0, 1<<20) }},
		{"chmod", func() error { return os.Chmod(path, 0o644) }},
		{"symlink", func() error { return os.Symlink(path, filepath.Join(dir, "sym")) }},
		{"link", func() error { return os.Link(path, filepath.Join(dir, "hard")) }},
		{"setxattr", func() error { return unix.Setxattr(path, "user.x", []byte("1"), 0) }},
		{"O_TMPFILE", func() error {
			fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR, 0o600)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s while writes fail: %v, want EIO", c.name, err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "before" {
		t.Errorf("read while writes fail: %q, %v; want what was written before", got, err)
	}
	if f.Failed() < int64(len(calls)) {
		t.Errorf("Failed() = %d, want at least %d", f.Failed(), len(calls))
	}

	f.FailWrites(false)
	if _, err := file.WriteAt([]byte("after!"), 0); err != nil {
		t.Fatalf("write after the fault: %v", err)
	}
	if err := file.Sync(); err != nil {
		t.Fatalf("fsync after the fault: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "after!" {
		t.Errorf("read after the fault: %q", got)
	}
}

// TestRaftLogOnAFailingDisk runs the log store lockd uses (bolt, which
// reads through mmap) on the mirror: a log write fails while the disk
// does, nothing of it is kept, and the store works again afterwards.
func TestRaftLogOnAFailingDisk(t *testing.T) {
	f, dir := faultfstest.MountTemp(t)
	path := filepath.Join(dir, "raft.db")
	store, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	// Closed before the unmount (cleanups run last in, first out): a
	// mount does not go cleanly while a file there is open.
	t.Cleanup(func() { store.Close() })
	entry := func(i uint64) *raft.Log { return &raft.Log{Index: i, Term: 1, Data: []byte("cmd")} }
	if err := store.StoreLog(entry(1)); err != nil {
		t.Fatal(err)
	}

	f.FailWrites(true)
	if err := store.StoreLog(entry(2)); err == nil {
		t.Fatal("a log write succeeded while the disk failed")
	}
	f.FailWrites(false)
	if err := store.Close(); err != nil {
		t.Logf("close after the fault: %v", err)
	}

	store, err = raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatalf("reopen after the fault: %v", err)
	}
	if last, _ := store.LastIndex(); last != 1 {
		t.Errorf("last index after a failed write = %d, want 1", last)
	}
	if err := store.StoreLog(entry(2)); err != nil {
		t.Fatalf("log write after the fault: %v", err)
	}
	var got raft.Log
	if err := store.GetLog(2, &got); err != nil || string(got.Data) != "cmd" {
		t.Errorf("entry 2 after the fault: %+v, %v", got, err)
	}
}
