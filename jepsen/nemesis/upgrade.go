package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
)

// Upgrade faults roll the cluster from an older build (the nodes start
// on compose.Cluster.Images) to this one (compose.DefaultImage), one node
// per fault, the leader last, as an operator does: stop the node
// gracefully (a leader hands over), start it again on the new image with
// its data, wait until the cluster is healthy with every voter. Mixed
// builds run side by side meanwhile, under the version gate (the leader
// writes no log format an older voter cannot apply). An upgrade is not
// undone; once every node runs the new build the fault does nothing.
//
// The negative control (Config.UngatedUpgrade) upgrades to this build
// run with --unsafe no-format-gate, the leader as soon as it and the new
// nodes make a majority, with the other old nodes paused until a new
// node leads, and leaves the last node on the old build: a partial
// upgrade whose new leader writes the newest log format while an older
// voter remains.

// FaultUpgrade is the upgrade fault's name; KindUpgrade draws it.
const (
	FaultUpgrade = "upgrade"
	KindUpgrade  = "upgrade"
)

// errNothingToDo: a fault that found nothing to do (every node upgraded).
var errNothingToDo = errors.New("nothing to do")

// upgradeNext moves the next node still on an older image to
// compose.DefaultImage.
func upgradeNext(ctx context.Context, c *compose.Cluster, cfg Config) (*fault, error) {
	var old []string
	for _, n := range c.Names() {
		if img := c.Images[n]; img != "" && img != compose.DefaultImage {
			old = append(old, n)
		}
	}
	if len(old) == 0 || cfg.UngatedUpgrade && len(old) == 1 {
		return nil, errNothingToDo
	}
	leader, _ := c.Leader(ctx)
	node := old[0]
	if node == leader && len(old) > 1 {
		node = old[1] // the leader last
	}
	var env, paused []string
	if cfg.UngatedUpgrade {
		env = []string{"LOCKD_UNSAFE=no-format-gate"}
		// Once the new nodes with the leader make a majority: elected by
		// them alone, a new node leads while old voters remain.
		if n := len(c.Names()); n-len(old) >= n/2 && slices.Contains(old, leader) {
			node, paused = leader, without(old, leader)
		}
	}
	from := c.Images[node]
	ft := &fault{name: FaultUpgrade, targets: []string{node, from + " -> " + compose.DefaultImage}}
	err := pauseAll(ctx, c, paused)
	if err == nil {
		err = c.SetImage(ctx, node, compose.DefaultImage, env...)
	}
	wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
	defer cancel()
	if len(paused) > 0 {
		if err == nil {
			if werr := waitLeader(wctx, c, func(l string) bool { return c.Images[l] == compose.DefaultImage }); werr != nil {
				err = fmt.Errorf("no node of the new build leads: %w", werr)
			}
		}
		err = errors.Join(err, resumeAll(c, paused))
	}
	if err != nil {
		return ft, err
	}
	return ft, c.WaitHealthy(wctx)
}

// pauseAll pauses nodes; if one fails it resumes those it paused.
func pauseAll(ctx context.Context, c *compose.Cluster, nodes []string) error {
	for i, n := range nodes {
		if err := Pause(ctx, c, n); err != nil {
			return errors.Join(err, resumeAll(c, nodes[:i]))
		}
	}
	return nil
}

// resumeAll resumes nodes with a context of its own: the fault's may
// have run out, and a node left paused would stay so until the end.
func resumeAll(c *compose.Cluster, nodes []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), RestartTimeout)
	defer cancel()
	var errs []error
	for _, n := range nodes {
		errs = append(errs, Resume(ctx, c, n))
	}
	return errors.Join(errs...)
}

// waitLeader waits until a node that ok accepts leads, or ctx ends.
func waitLeader(ctx context.Context, c *compose.Cluster, ok func(node string) bool) error {
	for {
		if l, _ := c.Leader(ctx); l != "" && ok(l) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}
