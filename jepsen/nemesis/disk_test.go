package nemesis

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/faultfs/faultfstest"
	"golang.org/x/sys/unix"
)

// A disk freed after disk-full or disk-crash has its space back, also
// on the faultfs mirror of disk and power runs, which keeps unsynced
// files open and removed ones linked for a power loss.
func TestFreeDiskGivesTheSpaceBack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("tmpfs and FUSE mounts need root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	disk := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Skipf("no tmpfs mount here: %v: %s", err, out)
	}
	t.Cleanup(func() { unix.Unmount(disk, unix.MNT_DETACH) }) // detached: the mirror lets go of it when it can
	backing, data := filepath.Join(disk, "data"), t.TempDir()
	if err := os.Mkdir(backing, 0o700); err != nil {
		t.Fatal(err)
	}
	faultfstest.Mount(t, backing, data)
	c := &compose.Cluster{DataDirs: map[string]string{"n1": data}}
	free := func() uint64 {
		var st unix.Statfs_t
		if err := unix.Statfs(disk, &st); err != nil {
			t.Fatal(err)
		}
		return st.Bavail * uint64(st.Bsize)
	}
	for round := range 2 { // the second fill needs the first's space back
		if err := FillDisk(c, "n1"); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if f := free(); f > 1<<20 {
			t.Fatalf("round %d: %d bytes free on a full disk", round, f)
		}
		if err := FreeDisk(c, "n1"); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// FUSE releases a closed file after close returns: the space
		// may come back a moment later.
		deadline := time.Now().Add(5 * time.Second)
		for free() < 7<<20 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: only %d bytes free 5 s after FreeDisk", round, free())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
