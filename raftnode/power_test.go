package raftnode

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/lockd/lockd/jepsen/faultfs"
)

// TestStoresSurvivePowerLoss opens a node on a faultfs mirror, which
// keeps apart what was not fsynced, and loses power: the stores' names
// must be durable, for either log store (a node that lost raft.db would
// come back without its log and vote).
func TestStoresSurvivePowerLoss(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("FUSE mounts need root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	if runtime.GOMAXPROCS(0) < 2 { // bolt maps a file this process serves: see faultfs
		prev := runtime.GOMAXPROCS(2)
		t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	}
	for _, store := range []string{LogBolt, LogWAL} {
		t.Run(store, func(t *testing.T) {
			backing, dir := t.TempDir(), t.TempDir()
			fs, err := faultfs.Mount(backing, dir)
			if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENODEV) {
				t.Skipf("FUSE mounts are not allowed here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := fs.Unmount(); err != nil {
					t.Error(err)
				}
			})
			if err := openNodeWith(t, dir, store); err != nil {
				t.Fatal(err)
			}
			if _, err := fs.PowerLoss(nil); err != nil {
				t.Fatal(err)
			}
			names := []string{boltFile, "snapshots"}
			if store == LogWAL {
				names = append(names, walDir)
			}
			for _, name := range names {
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					t.Errorf("%s after a power loss: %v", name, err)
				}
			}
			if err := openNodeWith(t, dir, store); err != nil {
				t.Errorf("open after a power loss: %v", err)
			}
		})
	}
}
