// Command lockbench measures acquire+release throughput and latency through
// lockd's HTTP API, with several numbers of concurrent clients.
//
//	lockbench --spawn 3 --lockd bin/lockd --clients 1,16,64 --duration 10s
//	lockbench --addrs 127.0.0.1:7001,127.0.0.1:7002 --clients 16
//
// Each client opens a session and repeats: acquire its own name (no
// contention), release it. A pair is one acquire plus one release, two log
// entries. With --spawn it starts a local cluster of real lockd processes
// (fsync on) in a temporary directory and stops it at the end; otherwise it
// uses the nodes in --addrs. Clients go to the leader unless --spread.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// run does the work; returning (not exiting) lets the deferred cluster
// stop run on every path, so no spawned lockd outlives lockbench.
func run() error {
	var (
		addrs    = flag.String("addrs", "", "comma-separated HTTP addresses of running nodes")
		spawn    = flag.Int("spawn", 0, "start a local cluster of this many lockd processes instead")
		lockd    = flag.String("lockd", "bin/lockd", "lockd binary for --spawn")
		clients  = flag.String("clients", "1,16,64", "comma-separated client counts to run")
		duration = flag.Duration("duration", 10*time.Second, "how long each run lasts")
		warmup   = flag.Duration("warmup", time.Second, "unmeasured time before each run")
		spread   = flag.Bool("spread", false, "spread clients over all nodes (followers forward) instead of using the leader")
		prefix   = flag.String("prefix", "bench", "lock name prefix")
	)
	flag.Parse()
	counts, err := parseCounts(*clients)
	if err != nil {
		return err
	}
	nodes := splitList(*addrs)
	if *spawn > 0 {
		c, err := startCluster(*lockd, *spawn)
		if err != nil {
			return err
		}
		defer c.stop()
		nodes = c.addrs
	}
	if len(nodes) == 0 {
		return fmt.Errorf("give --addrs or --spawn")
	}
	leader, err := waitLeader(nodes, 30*time.Second) // also: the cluster is up
	if err != nil {
		return err
	}
	targets := []string{leader}
	if *spread {
		targets = nodes
	}
	fmt.Printf("lockbench: %d node(s), clients to %s, %v per run\n", len(nodes), strings.Join(targets, ","), *duration)
	fmt.Printf("%8s %12s %12s %10s %10s %10s %8s\n", "clients", "pairs", "pairs/s", "p50", "p99", "max", "errors")
	for _, n := range counts {
		r, err := bench(targets, n, *prefix, *warmup, *duration)
		if err != nil {
			return err
		}
		fmt.Printf("%8d %12d %12.0f %10v %10v %10v %8d\n", n, r.pairs, r.rate(),
			r.quantile(0.50), r.quantile(0.99), r.quantile(1), r.errors)
	}
	return nil
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad client count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
