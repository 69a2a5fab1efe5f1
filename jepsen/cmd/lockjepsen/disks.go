package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/faultfs"
	"github.com/lockd/lockd/jepsen/nemesis"
)

// diskSize is the size of each node's data dir in disk runs: room for
// two of raft-wal's segments, which it preallocates at 64 MiB each, beside
// raft.db and snapshots (a 64 MiB disk cannot hold the first segment).
const diskSize = "256m"

// smallDisk is one node's data dir in disk runs: a tmpfs of diskSize
// (which disk-full fills), seen through a faultfs mirror of a directory
// on it (which disk-fail makes fail its writes, and the power faults
// lose what was not fsynced).
type smallDisk struct {
	root   string      // the temporary directory holding both
	tmpfs  string      // root/disk, the tmpfs
	data   string      // what the node mounts: root/data, the mirror; the tmpfs without one
	mirror *faultfs.FS // nil without a mirror
}

// smallDisks are the data dirs of a disk run, by node.
type smallDisks map[string]*smallDisk

// mountSmallDisks mounts a smallDisk for each node, with a mirror if
// asked. It returns those it mounted, also on an error.
func mountSmallDisks(nodes []string, mirror bool) (smallDisks, error) {
	disks := smallDisks{}
	for _, n := range nodes {
		root, err := os.MkdirTemp("", "lockd-jepsen-"+n+"-")
		if err != nil {
			return disks, err
		}
		d := &smallDisk{root: root, tmpfs: filepath.Join(root, "disk"), data: filepath.Join(root, "disk")}
		disks[n] = d
		if err := os.Mkdir(d.tmpfs, 0o700); err != nil {
			return disks, err
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+diskSize, "tmpfs", d.tmpfs).CombinedOutput(); err != nil {
			return disks, fmt.Errorf("mount a tmpfs for %s: %w: %s", n, err, out)
		}
		if !mirror {
			continue
		}
		// The mirror serves a directory of the tmpfs, so that the files
		// it keeps for a power loss (beside what it serves) take the
		// same space.
		data, backing := filepath.Join(root, "data"), filepath.Join(d.tmpfs, "data")
		if err := os.Mkdir(data, 0o700); err != nil {
			return disks, err
		}
		if err := os.Mkdir(backing, 0o700); err != nil {
			return disks, err
		}
		if d.mirror, err = faultfs.Mount(backing, data); err != nil {
			return disks, fmt.Errorf("%s: %w", n, err)
		}
		d.data = data
	}
	return disks, nil
}

// attachSmallDisks mounts the small disks of a disk run and gives them
// to cl. A mirror only where writes may fail: disk-full alone runs on
// the plain tmpfs, and with --keep the mirror would end with this
// process (CheckOffered refuses the EIO faults by name then).
func attachSmallDisks(cl *compose.Cluster, cfg *runConfig, logf func(string, ...any)) (smallDisks, error) {
	mirror := nemesis.FailsWrites(cfg.nemeses) && !cfg.keep
	disks, err := mountSmallDisks(cl.Names(), mirror)
	if err != nil {
		return disks, err
	}
	cl.DataDirs, cl.FailingDisks = disks.dataDirs(), disks.failing()
	if cfg.keep && nemesis.FailsWrites(cfg.nemeses) {
		logf("--keep: the data dirs are plain tmpfs (a faultfs mirror would end with this process), so no disk-fail faults")
	}
	return disks, nil
}

// dataDirs are the directories the nodes mount as their data dirs.
func (disks smallDisks) dataDirs() map[string]string {
	dirs := map[string]string{}
	for n, d := range disks {
		dirs[n] = d.data
	}
	return dirs
}

// failing are the mirrors that can fail their writes; nil without any.
func (disks smallDisks) failing() map[string]compose.WriteFailer {
	var out map[string]compose.WriteFailer
	for n, d := range disks {
		if d.mirror != nil {
			if out == nil {
				out = map[string]compose.WriteFailer{}
			}
			out[n] = d.mirror
		}
	}
	return out
}

// unmount undoes mountSmallDisks for d: the mirror, then the tmpfs.
func (d *smallDisk) unmount() error {
	var errs []error
	if d.mirror != nil {
		errs = append(errs, d.mirror.Unmount())
	}
	if out, err := exec.Command("umount", d.tmpfs).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("unmount %s: %w: %s", d.tmpfs, err, out))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.RemoveAll(d.root)
}

// unmountDisks unmounts every disk, after the cluster is down (unless
// --keep, which keeps them for the cluster left running).
func unmountDisks(disks smallDisks, cfg *runConfig, logf func(string, ...any)) {
	for n, d := range disks {
		if cfg.keep {
			logf("%s's data dir %s stays mounted (--keep)", n, d.data)
			continue
		}
		if d.mirror != nil {
			logf("%s's disk failed %d writes with EIO", n, d.mirror.Failed())
		}
		if err := d.unmount(); err != nil {
			logf("%s's data dir: %v", n, err)
		}
	}
}
