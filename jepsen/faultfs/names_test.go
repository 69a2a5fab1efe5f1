package faultfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/lockd/lockd/jepsen/faultfs"
	"github.com/lockd/lockd/jepsen/faultfs/faultfstest"
)

// mkdir makes the directory path.
func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
}

// rename renames from to to.
func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// remove removes path, a file or an empty directory.
func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// powerLoss loses power on f, which must apply in full.
func powerLoss(t *testing.T, f *faultfs.Remote) faultfs.Loss {
	t.Helper()
	loss, err := f.PowerLoss(nil)
	if err != nil {
		t.Fatalf("power loss: %v", err)
	}
	return loss
}

// wantFiles checks the contents of files under dir ("<absent>": none).
func wantFiles(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := read(t, filepath.Join(dir, name)); got != w {
			t.Errorf("%s after the power loss: %q, want %q", name, got, w)
		}
	}
}

// TestRenamedDirectoryWithUnsyncedFiles: files made in a directory that
// is then renamed, as raft writes a snapshot in <id>.tmp and renames it
// <id>. The undo of their names finds them under the new name; an fsync
// of the directory under its new name (or through a handle opened under
// the old) makes them durable; the rename itself is its parent's.
func TestRenamedDirectoryWithUnsyncedFiles(t *testing.T) {
	tests := []struct {
		name string
		sync func(t *testing.T, dir string, early *os.File) // after the rename
		want map[string]string
	}{
		{"parent fsynced", func(t *testing.T, dir string, _ *os.File) { syncDir(t, dir) },
			map[string]string{"x.tmp/f": "<absent>", "x/f": "<absent>", "x/g": "<absent>"}},
		{"parent and directory fsynced", func(t *testing.T, dir string, _ *os.File) {
			syncDir(t, filepath.Join(dir, "x"))
			syncDir(t, dir)
		}, map[string]string{"x.tmp/f": "<absent>", "x/f": "f", "x/g": "g"}},
		{"directory fsynced through a handle opened before the rename", func(t *testing.T, dir string, early *os.File) {
			if err := early.Sync(); err != nil {
				t.Fatal(err)
			}
			syncDir(t, dir)
		}, map[string]string{"x/f": "f", "x/g": "g"}},
		{"nothing fsynced", func(*testing.T, string, *os.File) {},
			map[string]string{"x.tmp": "<absent>", "x/f": "<absent>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, dir := faultfstest.MountTemp(t)
			tmp := filepath.Join(dir, "x.tmp")
			mkdir(t, tmp)
			early, err := os.Open(tmp)
			if err != nil {
				t.Fatal(err)
			}
			defer early.Close()
			write(t, filepath.Join(tmp, "f"), []byte("f"), 0, true)
			write(t, filepath.Join(tmp, "g"), []byte("g"), 0, true)
			rename(t, tmp, filepath.Join(dir, "x"))
			tt.sync(t, dir, early)
			powerLoss(t, f)
			wantFiles(t, dir, tt.want)
		})
	}
}

// TestRenameThenUnlink: a file renamed and then removed comes back under
// its old name; one whose removal is durable does not, and its rename,
// pending on the other directory only, is left alone.
func TestRenameThenUnlink(t *testing.T) {
	tests := []struct {
		name string
		ops  func(t *testing.T, dir string)
		want map[string]string
	}{
		{"in one directory", func(t *testing.T, dir string) {
			rename(t, filepath.Join(dir, "a/f"), filepath.Join(dir, "a/g"))
			remove(t, filepath.Join(dir, "a/g"))
		}, map[string]string{"a/f": "durable", "a/g": "<absent>"}},
		{"across directories", func(t *testing.T, dir string) {
			rename(t, filepath.Join(dir, "a/f"), filepath.Join(dir, "b/f"))
			remove(t, filepath.Join(dir, "b/f"))
		}, map[string]string{"a/f": "durable", "b/f": "<absent>"}},
		{"across directories, the second fsynced", func(t *testing.T, dir string) {
			rename(t, filepath.Join(dir, "a/f"), filepath.Join(dir, "b/f"))
			remove(t, filepath.Join(dir, "b/f"))
			syncDir(t, filepath.Join(dir, "b"))
		}, map[string]string{"b/f": "<absent>"}},
		{"in a directory renamed between", func(t *testing.T, dir string) {
			rename(t, filepath.Join(dir, "a/f"), filepath.Join(dir, "a/g"))
			rename(t, filepath.Join(dir, "a"), filepath.Join(dir, "c"))
			remove(t, filepath.Join(dir, "c/g"))
		}, map[string]string{"a/f": "durable", "c": "<absent>"}},
		{"the rename's directory fsynced, then the removal lost", func(t *testing.T, dir string) {
			rename(t, filepath.Join(dir, "a/f"), filepath.Join(dir, "a/g"))
			syncDir(t, filepath.Join(dir, "a"))
			remove(t, filepath.Join(dir, "a/g"))
		}, map[string]string{"a/f": "<absent>", "a/g": "durable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, dir := faultfstest.MountTemp(t)
			mkdir(t, filepath.Join(dir, "a"))
			mkdir(t, filepath.Join(dir, "b"))
			write(t, filepath.Join(dir, "a/f"), []byte("durable"), 0, true)
			syncDir(t, filepath.Join(dir, "a"))
			syncDir(t, dir)
			tt.ops(t, dir)
			powerLoss(t, f)
			wantFiles(t, dir, tt.want)
		})
	}
}

// TestRemovedTree: os.RemoveAll of a durable tree (an unlink of each
// file, an rmdir of each directory, deepest first) comes back whole
// after a power loss, unless its parent was fsynced: then it is gone,
// and so is what the mirror kept of it. It comes back whole too where
// the kernel still held a removed directory (open here), whose inode it
// keeps dead: lookups in it fail.
func TestRemovedTree(t *testing.T) {
	tests := []struct {
		name         string
		synced, held bool
	}{
		{"parent not fsynced", false, false},
		{"parent fsynced", true, false},
		{"held open across its removal", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backing, dir := t.TempDir(), t.TempDir()
			f := faultfstest.Mount(t, backing, dir)
			tree := map[string]string{"t/a": "a", "t/sub/b": "b", "t/sub/deeper/c": "c"}
			for _, d := range []string{"t", "t/sub", "t/sub/deeper"} {
				mkdir(t, filepath.Join(dir, d))
			}
			for name, data := range tree {
				write(t, filepath.Join(dir, name), []byte(data), 0, true)
			}
			for _, d := range []string{"t/sub/deeper", "t/sub", "t", "."} {
				syncDir(t, filepath.Join(dir, d))
			}
			if tt.held {
				held, err := os.Open(filepath.Join(dir, "t/sub"))
				if err != nil {
					t.Fatal(err)
				}
				defer held.Close()
			}
			if err := os.RemoveAll(filepath.Join(dir, "t")); err != nil {
				t.Fatal(err)
			}
			if tt.synced {
				syncDir(t, dir)
				for name := range tree {
					tree[name] = "<absent>"
				}
			}
			loss := powerLoss(t, f)
			wantFiles(t, dir, tree)
			if !tt.synced && loss.Names != 6 {
				t.Errorf("%d changes to names undone, want 6 (3 unlinks, 3 rmdirs)", loss.Names)
			}
			if kept, err := os.ReadDir(faultfs.GraveyardOf(backing)); err != nil || len(kept) > 0 {
				t.Errorf("the mirror still keeps %d removed files or directories (%v)", len(kept), err)
			}
		})
	}
}

// TestRemovalsAsTheDiskDoes: rmdir and a rename over a directory fail
// as on the backing disk, and a directory replaced by a rename comes
// back after a power loss.
func TestRemovalsAsTheDiskDoes(t *testing.T) {
	f, dir := faultfstest.MountTemp(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	mkdir(t, p("full"))
	write(t, p("full/f"), []byte("f"), 0, true)
	mkdir(t, p("empty"))
	mkdir(t, p("other"))
	write(t, p("file"), []byte("file"), 0, true)
	syncDir(t, p("full"))
	syncDir(t, dir)

	for _, c := range []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"rmdir of a directory with a file", syscall.Rmdir(p("full")), syscall.ENOTEMPTY},
		{"rmdir of a file", syscall.Rmdir(p("file")), syscall.ENOTDIR},
		{"rmdir of nothing", syscall.Rmdir(p("none")), syscall.ENOENT},
		{"rename over a directory with a file", syscall.Rename(p("empty"), p("full")), syscall.ENOTEMPTY},
		{"unlink of a directory", syscall.Unlink(p("empty")), syscall.EISDIR},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := syscall.Rename(p("other"), p("empty")); err != nil { // replaces it (os.Rename refuses to)
		t.Fatal(err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range names {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, []string{"empty", "file", "full"}) {
		t.Errorf("after the rename: %v", got)
	}
	powerLoss(t, f)
	for _, name := range []string{"empty", "other", "full"} {
		if st, err := os.Stat(p(name)); err != nil || !st.IsDir() {
			t.Errorf("%s after the power loss: %v", name, err)
		}
	}
	wantFiles(t, dir, map[string]string{"full/f": "f", "file": "file"})
}
