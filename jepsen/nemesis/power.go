package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"

	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/faultfs"
)

// Power faults take from a node what fsync does not promise, on the
// faultfs mirrors of disk runs (compose.Cluster.FailingDisks), which keep
// what each node wrote since its last fsync apart from what is durable.
// power-loss kills one node (the leader half the time), throws away what
// it had not made durable — each file's writes since its last fsync,
// each name created, renamed or removed since its directory's — and
// starts it again when undone. power-loss-majority does so to a majority
// at once (the leader among them half the time) while the others are
// paused, starts them, and resumes the others once one of them leads:
// an entry acknowledged is on a majority's disks, so it must survive,
// and a store that acknowledged what it never fsynced (--unsafe
// no-fsync, the negative control) loses it for good. torn-write is a
// power loss of one node in which the last unsynced write of each file
// lands in part: a prefix of its pages. bad-read makes every read of
// one node's files fail with EIO, or return a changed byte, while it
// lasts: the node must refuse what its checksums catch and stop, never
// serve or replicate it.
const (
	FaultPowerLoss         = "power-loss"
	FaultPowerLossMajority = "power-loss-majority"
	FaultTornWrite         = "torn-write"
	FaultBadRead           = "bad-read"
	KindPower              = "power"
)

// PowerDisk is a data dir that can lose power and fail its reads: a
// faultfs mirror.
type PowerDisk interface {
	PowerLoss(tear *rand.Rand) (faultfs.Loss, error)
	FailReads(on bool)
	CorruptReads(on bool)
}

// powerFaults are the faults of KindPower a cluster offers: none
// without mirrors.
func powerFaults(failingDisks bool) []string {
	if !failingDisks {
		return nil
	}
	return []string{FaultPowerLoss, FaultPowerLossMajority, FaultTornWrite, FaultBadRead}
}

// powerDisk is node's mirror.
func powerDisk(c *compose.Cluster, node string) (PowerDisk, error) {
	if d, ok := c.FailingDisks[node].(PowerDisk); ok {
		return d, nil
	}
	return nil, fmt.Errorf("%s: no disk that can lose power (run with the power or disk nemesis)", node)
}

// losePower crashes node and throws away what it had not made durable,
// tearing writes with tear if set; the node stays stopped.
func losePower(ctx context.Context, c *compose.Cluster, node string, tear *rand.Rand, logf func(string, ...any)) error {
	d, err := powerDisk(c, node)
	if err != nil {
		return err
	}
	if err := crash(ctx, c, node); err != nil {
		return fmt.Errorf("power loss on %s: %w", node, err)
	}
	loss, err := d.PowerLoss(tear)
	if logf != nil {
		logf("nemesis: %s lost power: %d files and %d names not durable undone, %d writes torn", node, loss.Files, loss.Names, loss.Torn)
	}
	if err != nil {
		return fmt.Errorf("power loss on %s: %w", node, err)
	}
	return nil
}

// powerLossOne is power-loss (tear nil) or torn-write on node, which is
// started again when undone.
func powerLossOne(ctx context.Context, c *compose.Cluster, cfg Config, name, node string, tear *rand.Rand) (*fault, error) {
	ft := &fault{name: name, targets: []string{node},
		undo: func(ctx context.Context) error { return Restart(ctx, c, node) }}
	return ft, losePower(ctx, c, node, tear, cfg.Logf)
}

// powerLossMajority is power-loss-majority: see the consts.
func powerLossMajority(ctx context.Context, c *compose.Cluster, cfg Config, r *rand.Rand) (*fault, error) {
	nodes := c.Names()
	lost := majorityWithLeader(nodes, currentLeader(ctx, c), r.Intn(2) == 0, r)
	var rest []string
	for _, n := range nodes {
		if !slices.Contains(lost, n) {
			rest = append(rest, n)
		}
	}
	ft := &fault{name: FaultPowerLossMajority, targets: lost}
	errs := []error{pauseAll(ctx, c, rest)}
	for _, n := range lost {
		errs = append(errs, losePower(ctx, c, n, nil, cfg.Logf))
	}
	for _, n := range lost {
		errs = append(errs, startNode(ctx, c, n))
	}
	wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
	if err := waitLeader(wctx, c, func(l string) bool { return slices.Contains(lost, l) }); err != nil {
		errs = append(errs, fmt.Errorf("none of %v leads: %w", lost, err))
	}
	cancel()
	errs = append(errs, resumeAll(c, rest))
	return ft, errors.Join(errs...)
}

// majorityWithLeader draws a majority of nodes that holds leader if
// withLeader, and leaves it out otherwise (leader "" or not in nodes:
// any majority).
func majorityWithLeader(nodes []string, leader string, withLeader bool, r *rand.Rand) []string {
	k := len(nodes)/2 + 1
	order := shuffled(nodes, r)
	if !slices.Contains(nodes, leader) {
		return order[:k]
	}
	order = slices.DeleteFunc(order, func(n string) bool { return n == leader })
	if withLeader {
		return append([]string{leader}, order[:k-1]...)
	}
	return order[:k]
}

// badRead makes node's reads fail (EIO) or, half the time, return a
// changed byte, until undone.
func badRead(c *compose.Cluster, node string, r *rand.Rand) (*fault, error) {
	d, err := powerDisk(c, node)
	if err != nil {
		return nil, err
	}
	set := d.FailReads
	if r.Intn(2) == 0 {
		set = d.CorruptReads
	}
	set(true)
	return &fault{name: FaultBadRead, targets: []string{node},
		undo: func(context.Context) error { set(false); return nil }}, nil
}
