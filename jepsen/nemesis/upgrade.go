package nemesis

import (
	"context"
	"errors"

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

// FaultUpgrade is the upgrade fault's name; KindUpgrade draws it.
const (
	FaultUpgrade = "upgrade"
	KindUpgrade  = "upgrade"
)

// errNothingToDo: a fault that found nothing to do (every node upgraded).
var errNothingToDo = errors.New("nothing to do")

// upgradeNext moves the next node still on an older image to
// compose.DefaultImage.
func upgradeNext(ctx context.Context, c *compose.Cluster) (*fault, error) {
	var old []string
	for _, n := range c.Names() {
		if img := c.Images[n]; img != "" && img != compose.DefaultImage {
			old = append(old, n)
		}
	}
	if len(old) == 0 {
		return nil, errNothingToDo
	}
	node := old[0]
	if l, _ := c.Leader(ctx); l == node && len(old) > 1 {
		node = old[1] // the leader last
	}
	from := c.Images[node]
	ft := &fault{name: FaultUpgrade, targets: []string{node, from + " -> " + compose.DefaultImage}}
	if err := c.SetImage(ctx, node, compose.DefaultImage); err != nil {
		return ft, err
	}
	wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
	defer cancel()
	return ft, c.WaitHealthy(wctx)
}
