package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"

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

// Disk fault names; KindDisk draws them. disk-crash fills the data dirs
// of a majority (the leader's first), and undoing crashes those nodes
// (kill -9) while the others are paused, frees their disks and starts
// them again: a power loss on full disks. They come back with what they
// persisted and elect a leader among themselves before the others
// resume, so an entry acknowledged but never persisted (--unsafe
// lying-disk, the negative control) is lost for good.
const (
	FaultDiskFull  = "disk-full"
	FaultDiskCrash = "disk-crash"
	KindDisk       = "disk"
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

// diskCrash fills the data dirs of a majority, the leader's first; undoing
// crashes them (see FaultDiskCrash).
func diskCrash(ctx context.Context, c *compose.Cluster, r *rand.Rand) (*fault, error) {
	nodes := c.Names()
	full := shuffled(nodes, r)[:len(nodes)/2+1]
	if l, _ := c.Leader(ctx); l != "" {
		full = append([]string{l}, slices.DeleteFunc(full, func(n string) bool { return n == l })...)[:len(full)]
	}
	ft := &fault{name: FaultDiskCrash, targets: full,
		undo: func(ctx context.Context) error { return crashFull(ctx, c, full) }}
	for _, n := range full {
		if err := FillDisk(c, n); err != nil {
			return ft, err
		}
	}
	return ft, nil
}

// crashFull kills the nodes in full with the others paused, frees their
// disks, starts them, waits (bounded) until one of them leads, and
// resumes the others.
func crashFull(ctx context.Context, c *compose.Cluster, full []string) error {
	var rest []string
	for _, n := range c.Names() {
		if !slices.Contains(full, n) {
			rest = append(rest, n)
		}
	}
	errs := []error{pauseAll(ctx, c, rest)}
	for _, n := range full {
		errs = append(errs, crash(ctx, c, n), FreeDisk(c, n))
	}
	for _, n := range full {
		errs = append(errs, startNode(ctx, c, n))
	}
	wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
	if err := waitLeader(wctx, c, func(l string) bool { return slices.Contains(full, l) }); err != nil {
		errs = append(errs, fmt.Errorf("none of %v leads: %w", full, err))
	}
	cancel()
	errs = append(errs, resumeAll(c, rest))
	return errors.Join(errs...)
}

// crash stops node at once: kill -9 if it runs, else (restarting after
// a fail-stop) docker stop, which ends the restart loop.
func crash(ctx context.Context, c *compose.Cluster, node string) error {
	if st, err := c.State(ctx, node); err == nil && st == "running" {
		return Kill(ctx, c, node)
	}
	id, err := c.Container(ctx, node)
	if err == nil {
		_, err = compose.Docker(ctx, "stop", "-t", "0", id)
	}
	return err
}

// startNode starts node's stopped container.
func startNode(ctx context.Context, c *compose.Cluster, node string) error {
	id, err := c.Container(ctx, node)
	if err == nil {
		_, err = compose.Docker(ctx, "start", id)
	}
	return err
}
