package nemesis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/lockd/lockd/jepsen/compose"
)

// Disk faults fill one node's data dir, the leader's half the time: the
// harness gives every node a small filesystem of its own on the host
// (compose.Cluster.DataDirs, a tmpfs each), and the fault allocates all
// its free space to one file, so that every write of the node fails with
// ENOSPC — raft's log, its stable store, snapshots. Undoing deletes the
// file. The node must acknowledge nothing it did not write, leave the
// leadership to a node that can write, and catch up once space returns;
// a node that exits meanwhile is started again by its restart policy.

// FaultDiskFull is the disk fault's name; KindDisk draws it.
const (
	FaultDiskFull = "disk-full"
	KindDisk      = "disk"
)

// fillerName is the file that takes a data dir's free space.
const fillerName = "jepsen-disk-filler"

// FillDisk allocates all the free space of node's data dir to one file.
func FillDisk(c *compose.Cluster, node string) error {
	dir := c.DataDirs[node]
	if dir == "" {
		return fmt.Errorf("fill %s: no data dir of its own (run with the disk nemesis)", node)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("fill %s: %w", node, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, fillerName), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("fill %s: %w", node, err)
	}
	defer f.Close()
	free := int64(st.Bavail) * int64(st.Bsize)
	err = unix.Fallocate(int(f.Fd()), 0, 0, free)
	if errors.Is(err, unix.ENOSPC) { // the node wrote meanwhile: what fits is enough
		err = nil
	}
	if err != nil {
		return fmt.Errorf("fill %s: fallocate %d bytes: %w", node, free, err)
	}
	return nil
}

// FreeDisk deletes the file FillDisk made.
func FreeDisk(c *compose.Cluster, node string) error {
	err := os.Remove(filepath.Join(c.DataDirs[node], fillerName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// diskFull fills node's data dir until undone.
func diskFull(c *compose.Cluster, node string) (*fault, error) {
	ft := &fault{name: FaultDiskFull, targets: []string{node},
		undo: func(context.Context) error { return FreeDisk(c, node) }}
	return ft, FillDisk(c, node)
}
