// Package nemesis injects faults into a docker-compose lockd cluster
// (package compose): network partitions (blackhole routes inside the
// containers' network namespaces), kill -9 and restart, docker
// pause/unpause, and a random fault schedule (Run) that records every
// fault in the history and always leaves the cluster healed.
//
// Partitions are `ip route replace blackhole <peer>/32` routes added
// with nsenter in each node's netns for every peer it must not reach;
// since both ends get the route, both directions are cut. The host can
// still reach every node's published HTTP port (that traffic comes from
// the network's gateway address, which is never blackholed). A
// container restarted after a kill gets a fresh netns, without routes:
// re-apply a partition after restarting a node if it must persist.
//
// docker kill does not trigger the `restart: on-failure` policy (Docker
// treats it as a manual stop), so a killed node stays down until
// Restart; Kill checks that.
package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
)

// RestartTimeout bounds how long Restart waits for a node to answer
// /v1/status and know a leader.
var RestartTimeout = 60 * time.Second

// Route is one blackhole route: From's netns drops packets to To.
type Route struct {
	From, To string
}

// RoutePlan returns, for groups, the blackhole routes that cut every pair
// of nodes that share no group (in both directions: one route on each
// side), sorted by From then To. A node may appear in several groups (a
// bridge reaches all of them). Nodes in no group are not touched.
func RoutePlan(groups [][]string) []Route {
	together := map[[2]string]bool{}
	all := map[string]bool{}
	for _, g := range groups {
		for _, a := range g {
			all[a] = true
			for _, b := range g {
				together[[2]string{a, b}] = true
			}
		}
	}
	nodes := make([]string, 0, len(all))
	for n := range all {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var out []Route
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b && !together[[2]string{a, b}] {
				out = append(out, Route{a, b})
			}
		}
	}
	return out
}

// GroupsString formats groups as "n1,n2|n3" (one entry per group when
// used as history Targets: see Targets).
func GroupsString(groups [][]string) string {
	return strings.Join(Targets(groups), "|")
}

// Targets returns one comma-joined entry per group: the Targets of a
// partition event.
func Targets(groups [][]string) []string {
	out := make([]string, len(groups))
	for i, g := range groups {
		out[i] = strings.Join(g, ",")
	}
	return out
}

// ParseGroups parses groups given as comma-separated lists, e.g.
// ["n1,n2", "n3"].
func ParseGroups(args []string) [][]string {
	var out [][]string
	for _, a := range args {
		var g []string
		for _, n := range strings.Split(a, ",") {
			if n = strings.TrimSpace(n); n != "" {
				g = append(g, n)
			}
		}
		if len(g) > 0 {
			out = append(out, g)
		}
	}
	return out
}

func without(nodes []string, skip string) []string {
	var out []string
	for _, n := range nodes {
		if n != skip {
			out = append(out, n)
		}
	}
	return out
}

func shuffled(nodes []string, r *rand.Rand) []string {
	out := append([]string(nil), nodes...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// IsolateGroups cuts node off from all the others: {{node}, {others}}.
func IsolateGroups(nodes []string, node string) [][]string {
	return [][]string{{node}, without(nodes, node)}
}

// RandomIsolate isolates a random node.
func RandomIsolate(nodes []string, r *rand.Rand) [][]string {
	return IsolateGroups(nodes, nodes[r.Intn(len(nodes))])
}

// MajorityMinority splits nodes at random into a majority and a minority
// (3: 2+1, 5: 3+2), majority first.
func MajorityMinority(nodes []string, r *rand.Rand) [][]string {
	s := shuffled(nodes, r)
	k := len(s)/2 + 1
	maj, min := append([]string(nil), s[:k]...), append([]string(nil), s[k:]...)
	sort.Strings(maj)
	sort.Strings(min)
	return [][]string{maj, min}
}

// Bridge returns two overlapping groups sharing one random node, the
// bridge, which reaches both sides while they cannot reach each other:
// 3 nodes {a,b},{b,c}; 5 nodes {a,b,c},{c,d,e}. Each group is a
// majority only through the bridge.
func Bridge(nodes []string, r *rand.Rand) [][]string {
	s := shuffled(nodes, r)
	mid := len(s) / 2 // the bridge
	a := append([]string(nil), s[:mid+1]...)
	b := append([]string(nil), s[mid:]...)
	return [][]string{a, b}
}

func nsRun(ctx context.Context, pid int, stdin string, args ...string) error {
	full := append([]string{"-t", fmt.Sprint(pid), "-n"}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("nsenter %s: %w: %s", strings.Join(full, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Partition heals every running node and then installs the blackhole
// routes of RoutePlan(groups), so that nodes in different groups cannot
// exchange packets. Every node named in groups must be running or
// paused.
func Partition(ctx context.Context, c *compose.Cluster, groups [][]string) error {
	if err := Heal(ctx, c); err != nil {
		return err
	}
	byNode := map[string][]string{}
	for _, r := range RoutePlan(groups) {
		byNode[r.From] = append(byNode[r.From], r.To)
	}
	for node, peers := range byNode {
		pid, err := c.PID(ctx, node)
		if err != nil {
			return err
		}
		if pid == 0 {
			return fmt.Errorf("partition: %s is not running", node)
		}
		var b strings.Builder
		for _, p := range peers {
			ip := c.IP(p)
			if ip == "" {
				return fmt.Errorf("partition: bad node %q", p)
			}
			fmt.Fprintf(&b, "route replace blackhole %s/32\n", ip)
		}
		if err := nsRun(ctx, pid, b.String(), "ip", "-batch", "-"); err != nil {
			return fmt.Errorf("partition %s: %w", node, err)
		}
	}
	return nil
}

// Heal removes every blackhole route in every node's netns. Stopped
// nodes (no pid, hence no netns and no routes) are skipped; paused ones
// are healed too.
func Heal(ctx context.Context, c *compose.Cluster) error {
	var firstErr error
	for _, n := range c.Names() {
		pid, err := c.PID(ctx, n)
		if err != nil || pid == 0 {
			continue // no container, or stopped
		}
		if err := nsRun(ctx, pid, "", "ip", "route", "flush", "type", "blackhole"); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("heal %s: %w", n, err)
		}
	}
	return firstErr
}

// Blackholes returns, per running node, the peers it currently drops
// (for display and tests).
func Blackholes(ctx context.Context, c *compose.Cluster) (map[string][]string, error) {
	out := map[string][]string{}
	for _, n := range c.Names() {
		pid, err := c.PID(ctx, n)
		if err != nil || pid == 0 {
			continue
		}
		cmd := exec.CommandContext(ctx, "nsenter", "-t", fmt.Sprint(pid), "-n", "ip", "route", "show", "type", "blackhole")
		b, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("%s: ip route show: %w", n, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "blackhole" {
				ip := strings.TrimSuffix(f[1], "/32")
				if p := c.NodeByIP(ip); p != "" {
					out[n] = append(out[n], p)
				} else {
					out[n] = append(out[n], ip)
				}
			}
		}
	}
	return out, nil
}

// Kill sends SIGKILL to node's container (docker kill -s KILL) and
// checks that it stays stopped (the restart policy ignores docker kill).
func Kill(ctx context.Context, c *compose.Cluster, node string) error {
	id, err := c.Container(ctx, node)
	if err != nil {
		return err
	}
	if _, err := compose.Docker(ctx, "kill", "-s", "KILL", id); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := c.State(ctx, node)
		if err != nil {
			return err
		}
		if st == "exited" || st == "dead" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill %s: container still %s after docker kill", node, st)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Restart starts node's container again if it is stopped (unpauses it if
// paused) and waits, at most RestartTimeout, until it answers
// /v1/status and knows a leader. The restarted container has a new
// netns: no blackhole routes.
func Restart(ctx context.Context, c *compose.Cluster, node string) error {
	id, err := c.Container(ctx, node)
	if err != nil {
		return err
	}
	st, err := c.State(ctx, node)
	if err != nil {
		return err
	}
	switch st {
	case "running":
	case "paused":
		if _, err := compose.Docker(ctx, "unpause", id); err != nil {
			return err
		}
	default:
		if _, err := compose.Docker(ctx, "start", id); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
	defer cancel()
	return c.WaitNode(wctx, node)
}

// Pause freezes node's processes (docker pause: SIGSTOP-like, the
// network stays up).
func Pause(ctx context.Context, c *compose.Cluster, node string) error {
	id, err := c.Container(ctx, node)
	if err != nil {
		return err
	}
	_, err = compose.Docker(ctx, "pause", id)
	return err
}

// Resume unfreezes a paused node (docker unpause); a node that is not
// paused is left alone.
func Resume(ctx context.Context, c *compose.Cluster, node string) error {
	st, err := c.State(ctx, node)
	if err != nil {
		return err
	}
	if st != "paused" {
		return nil
	}
	id, err := c.Container(ctx, node)
	if err != nil {
		return err
	}
	_, err = compose.Docker(ctx, "unpause", id)
	return err
}

// Recover brings every node back: unpauses paused nodes, starts stopped
// ones, removes all blackhole routes. It tries everything and returns
// the first error.
func Recover(ctx context.Context, c *compose.Cluster) error {
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, n := range c.Names() {
		st, err := c.State(ctx, n)
		if err != nil {
			keep(err)
			continue
		}
		switch st {
		case "paused":
			keep(Resume(ctx, c, n))
		case "running":
		default:
			id, err := c.Container(ctx, n)
			if err == nil {
				_, err = compose.Docker(ctx, "start", id)
			}
			keep(err)
		}
	}
	for _, d := range c.FailingDisks { // a safety net: every disk fault mends its own
		d.FailWrites(false)
		if p, ok := d.(PowerDisk); ok {
			p.FailReads(false) // and every read fault
		}
	}
	keep(retireSpares(ctx, c)) // and every grow retires its spares
	keep(Heal(ctx, c))
	return firstErr
}

// Healthy recovers the cluster (Recover) and waits until every node
// answers, all agree on one leader and it lists every node as a voter.
// Without a deadline on ctx it waits at most 90 s.
func Healthy(ctx context.Context, c *compose.Cluster) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
	}
	if err := Recover(ctx, c); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}
