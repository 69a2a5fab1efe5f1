package faultfs_test

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/lockd/lockd/jepsen/faultfs"
	"github.com/lockd/lockd/jepsen/faultfs/faultfstest"
)

// pageSize is the unit a torn write lands in.
const pageSize = faultfs.PageSize

// write writes data at off to path and fsyncs it if sync.
func write(t *testing.T, path string, data []byte, off int64, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// syncDir fsyncs the directory dir.
func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// read is path's contents, or "<absent>".
func read(t *testing.T, path string) string {
	t.Helper()
	got, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

// TestPowerLossKeepsWhatWasSynced: a power loss throws away each write
// since its file's fsync and each name change since its directory's, and
// keeps the rest.
func TestPowerLossKeepsWhatWasSynced(t *testing.T) {
	f, dir := faultfstest.MountTemp(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, name := range []string{"log", "removed", "renamed", "replaced"} {
		write(t, p(name), []byte(name+"-durable"), 0, true)
	}
	write(t, p("later"), []byte("later-durable"), 0, true)
	syncDir(t, dir)

	write(t, p("log"), []byte("-lost"), int64(len("log-durable")), false) // an append
	write(t, p("log"), []byte("LOG"), 0, false)                           // an overwrite
	write(t, p("later"), []byte("LATER"), 0, false)
	write(t, p("later"), []byte("later-synced"), 0, true) // fsynced after: durable
	write(t, p("new"), []byte("new"), 0, true)            // its contents synced, its name not
	if err := os.Remove(p("removed")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p("renamed"), p("moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p("later"), p("replaced")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, p("sub/file"), []byte("sub"), 0, true)

	loss, err := f.PowerLoss(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"log":      "log-durable",
		"later":    "later-syncede", // its longer durable contents overwritten
		"new":      "<absent>",
		"removed":  "removed-durable",
		"renamed":  "renamed-durable",
		"moved":    "<absent>",
		"replaced": "replaced-durable",
		"sub/file": "<absent>",
	}
	for name, w := range want {
		if got := read(t, p(name)); got != w {
			t.Errorf("%s after a power loss: %q, want %q", name, got, w)
		}
	}
	if loss.Files == 0 || loss.Names == 0 {
		t.Errorf("loss %+v: want files and names undone", loss)
	}
}

// TestSyncedDirectoryKeepsItsNames: names made durable by the fsync of
// their directory survive a power loss, with their synced contents.
func TestSyncedDirectoryKeepsItsNames(t *testing.T) {
	f, dir := faultfstest.MountTemp(t)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write(t, a, []byte("a"), 0, true)
	write(t, b, []byte("b"), 0, false)
	syncDir(t, dir)
	if _, err := f.PowerLoss(nil); err != nil {
		t.Fatal(err)
	}
	if got := read(t, a); got != "a" {
		t.Errorf("a: %q, want its synced contents", got)
	}
	if got := read(t, b); got != "" {
		t.Errorf("b: %q, want its name without its unsynced contents", got)
	}
}

// TestTornWrite: at a power loss with tearing, the last unsynced write
// of a file lands as a prefix of its pages, never all of it.
func TestTornWrite(t *testing.T) {
	f, dir := faultfstest.MountTemp(t)
	path := filepath.Join(dir, "log")
	durable := bytes.Repeat([]byte{'d'}, 4*pageSize)
	write(t, path, durable, 0, true)
	syncDir(t, dir)
	last := bytes.Repeat([]byte{'x'}, 3*pageSize)
	write(t, path, []byte("earlier"), 0, false)
	write(t, path, last, pageSize, false)

	loss, err := f.PowerLoss(rand.New(rand.NewSource(1)))
	if err != nil {
		t.Fatal(err)
	}
	got := []byte(read(t, path))
	if loss.Torn != 1 || len(got) != len(durable) {
		t.Fatalf("torn %d, size %d: want 1 torn write in a file of %d bytes", loss.Torn, len(got), len(durable))
	}
	landed := bytes.Count(got, []byte{'x'})
	if landed == 0 || landed == len(last) || !bytes.Equal(got[pageSize:pageSize+landed], last[:landed]) {
		t.Errorf("%d bytes of the last write landed: want a prefix, neither none nor all", landed)
	}
	if (pageSize+landed)%pageSize != 0 {
		t.Errorf("the torn write ends at %d, not at a page boundary", pageSize+landed)
	}
	if !bytes.HasPrefix(got, durable[:pageSize]) {
		t.Errorf("the earlier unsynced write landed: %q", got[:8])
	}
}

// TestBadReads: while a read fault lasts, reads of a file fail with EIO
// or return a changed byte; once it ends they return what was written.
func TestBadReads(t *testing.T) {
	f, dir := faultfstest.MountTemp(t)
	path := filepath.Join(dir, "log")
	data := bytes.Repeat([]byte("lockd"), 1000)
	write(t, path, data, 0, true)
	if got := read(t, path); got != string(data) { // cached by the kernel, before the fault
		t.Fatal("read before the fault differs")
	}

	f.FailReads(true)
	if _, err := os.ReadFile(path); !errors.Is(err, syscall.EIO) {
		t.Errorf("read while reads fail: %v, want EIO", err)
	}
	f.CorruptReads(true)
	got, err := os.ReadFile(path)
	if err != nil || len(got) != len(data) || bytes.Equal(got, data) {
		t.Errorf("read while reads are corrupt: %d bytes, %v; want %d bytes, changed", len(got), err, len(data))
	}
	f.CorruptReads(false)
	if got := read(t, path); got != string(data) {
		t.Error("read after the fault differs from what was written")
	}
	if f.BadReads() < 2 {
		t.Errorf("BadReads() = %d, want at least 2", f.BadReads())
	}
}

// TestUnmountLetsGoOfUnsyncedFiles: the descriptors kept for a power
// loss are closed at Unmount, or the backing filesystem stays busy.
func TestUnmountLetsGoOfUnsyncedFiles(t *testing.T) {
	f, dir := faultfstest.MountTemp(t)
	write(t, filepath.Join(dir, "log"), []byte("unsynced"), 0, false)
	if kept := f.Unsynced(); kept != 1 {
		t.Fatalf("%d files kept for a power loss, want 1", kept)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if kept := f.Unsynced(); kept != 0 {
		t.Errorf("%d files still kept after Unmount", kept)
	}
}

// TestUnmountCutsAMountInUse: Unmount does not wait for a file left
// open on the mount: the mount is aborted and detached, and the file's
// calls fail.
func TestUnmountCutsAMountInUse(t *testing.T) {
	f, dir := faultfstest.MountTemp(t)
	file, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write([]byte("late")); !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
		t.Errorf("write on a file left open at Unmount: %v, want ENOTCONN", err)
	}
	if on, err := faultfs.Mounted(dir); on || err != nil {
		t.Errorf("a mirror still mounted after Unmount: %v, %v", on, err)
	}
}
