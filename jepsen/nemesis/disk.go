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

// Disk faults break one node's data dir, the leader's half the time: the
// harness gives every node a small filesystem of its own on the host
// (compose.Cluster.DataDirs, a tmpfs each, seen through a faultfs mirror
// where compose.Cluster.FailingDisks has one). disk-full allocates all
// its free space to one file, so that every write of the node fails with
// ENOSPC — raft's log, its stable store, snapshots; undoing deletes the
// file. disk-fail makes every write fail with EIO while reads go on;
// undoing lets writes through again. The node must acknowledge nothing
// it did not write, leave the leadership to a node that can write, and
// catch up once its disk works; a node that exits meanwhile is started
// again by its restart policy.

// Disk fault names; KindDisk draws them (the EIO faults only where the
// cluster has FailingDisks). disk-crash fills the data dirs of a
// majority (the leader's first), and undoing crashes those nodes (kill
// -9) while the others are paused, frees their disks and starts them
// again: a power loss on full disks. They come back with what they
// persisted and elect a leader among themselves before the others
// resume, so an entry acknowledged but never persisted (--unsafe
// lying-disk, the negative control) is lost for good. disk-fail-crash is
// the same with disks that fail their writes instead of full ones.
const (
	FaultDiskFull      = "disk-full"
	FaultDiskCrash     = "disk-crash"
	FaultDiskFail      = "disk-fail"
	FaultDiskFailCrash = "disk-fail-crash"
	KindDisk           = "disk"
)

// diskFaults are the faults of KindDisk a cluster offers.
func diskFaults(failingDisks bool) []string {
	if failingDisks {
		return []string{FaultDiskFull, FaultDiskCrash, FaultDiskFail, FaultDiskFailCrash}
	}
	return []string{FaultDiskFull, FaultDiskCrash}
}

// breakage is how a disk fault breaks a data dir and mends it.
type breakage struct {
	name        string // the fault's name
	apply, mend func(node string) error
}

// filling breaks a disk by filling it (ENOSPC).
func filling(c *compose.Cluster, name string) breakage {
	return breakage{name: name,
		apply: func(n string) error { return FillDisk(c, n) },
		mend:  func(n string) error { return FreeDisk(c, n) }}
}

// failing breaks a disk by failing its writes (EIO).
func failing(c *compose.Cluster, name string) breakage {
	set := func(on bool) func(string) error {
		return func(n string) error {
			d := c.FailingDisks[n]
			if d == nil {
				return fmt.Errorf("%s: no disk that can fail its writes (run with the disk nemesis)", n)
			}
			d.FailWrites(on)
			return nil
		}
	}
	return breakage{name: name, apply: set(true), mend: set(false)}
}

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
	// Durable at once: on a faultfs mirror an unsynced file is held open
	// for a power loss, and its space would outlive FreeDisk.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fill %s: %w", node, err)
	}
	return syncDir(dir)
}

// FreeDisk deletes the file FillDisk made, durably: on a faultfs mirror
// a removal not yet fsynced keeps the file (and its space) for a power
// loss to bring back.
func FreeDisk(c *compose.Cluster, node string) error {
	dir := c.DataDirs[node]
	err := os.Remove(filepath.Join(dir, fillerName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs dir, making the names in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// breakOne breaks node's disk until undone.
func breakOne(b breakage, node string) (*fault, error) {
	ft := &fault{name: b.name, targets: []string{node},
		undo: func(context.Context) error { return b.mend(node) }}
	return ft, b.apply(node)
}

// breakMajority breaks the disks of a majority, the leader's first;
// undoing crashes them (see FaultDiskCrash).
func breakMajority(ctx context.Context, c *compose.Cluster, r *rand.Rand, b breakage) (*fault, error) {
	nodes := c.Names()
	broken := shuffled(nodes, r)[:len(nodes)/2+1]
	if l, _ := c.Leader(ctx); l != "" {
		broken = append([]string{l}, slices.DeleteFunc(broken, func(n string) bool { return n == l })...)[:len(broken)]
	}
	ft := &fault{name: b.name, targets: broken,
		undo: func(ctx context.Context) error { return crashBroken(ctx, c, broken, b) }}
	for _, n := range broken {
		if err := b.apply(n); err != nil {
			return ft, err
		}
	}
	return ft, nil
}

// crashBroken kills the nodes in broken with the others paused, mends
// their disks, starts them, waits (bounded) until one of them leads, and
// resumes the others.
func crashBroken(ctx context.Context, c *compose.Cluster, broken []string, b breakage) error {
	var rest []string
	for _, n := range c.Names() {
		if !slices.Contains(broken, n) {
			rest = append(rest, n)
		}
	}
	errs := []error{pauseAll(ctx, c, rest)}
	for _, n := range broken {
		errs = append(errs, crash(ctx, c, n), b.mend(n))
	}
	for _, n := range broken {
		errs = append(errs, startNode(ctx, c, n))
	}
	wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
	if err := waitLeader(wctx, c, func(l string) bool { return slices.Contains(broken, l) }); err != nil {
		errs = append(errs, fmt.Errorf("none of %v leads: %w", broken, err))
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
