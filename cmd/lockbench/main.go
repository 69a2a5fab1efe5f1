// Command lockbench measures acquire+release throughput and latency through
// lockd's HTTP API, with several numbers of concurrent clients.
//
//	lockbench --spawn 3 --lockd bin/lockd --clients 1,16,64 --duration 10s
//	lockbench --spawn 3 --tls --clients 16
//	lockbench --addrs 127.0.0.1:7001,127.0.0.1:7002 --clients 16
//	lockbench --addrs 127.0.0.1:7001 --ca-cert certs/ca.pem --clients 16
//	lockbench --spawn 3 --keepalive 100000 --ttl 60s --clients 64 --duration 120s [--failover [--pause]]
//	lockbench --spawn 3 --mass-expiry 50000 --ttl 15s --clients 64 --duration 10s
//
// Each client opens a session and repeats: acquire its own name (no
// contention), release it. A pair is one acquire plus one release, two log
// entries. With --spawn it starts a local cluster of real lockd processes
// (fsync on) in a temporary directory and stops it at the end; otherwise it
// uses the nodes in --addrs. Clients go to the leader unless --spread.
//
// With --keepalive N it opens N sessions of TTL --ttl instead and keeps
// each alive every third of it on an even schedule (a random phase per
// session, a little jitter), from the moment it is opened; --failover
// kills the leader halfway through and reports the sessions lost and how
// long until every session was kept alive again; with --pause it pauses
// the leader instead (SIGSTOP) and resumes it once the others have a new
// one, so that it wakes believing it leads.
//
// With --mass-expiry N, 16 probe clients acquire and release names of
// their own throughout; after a quiet window of --duration it opens N
// sessions of TTL --ttl, each holding a lock of its own and kept alive
// until all are open, and a waiter session per 64 of them asks for their
// names; then the N sessions' clients all stop. It reports the probes'
// acquire latency in the quiet window and during the storm, every
// waiter's grant, how late the expiries came and the log entries they
// took.
//
// With --spawn, --tls makes a CA, a node certificate per node and a gossip
// key in the cluster's directory and starts every node with them: the HTTP
// API is HTTPS and the node port (raft, forwarding) mutual TLS. With
// --addrs, --ca-cert (and --client-cert and --client-key, for nodes that
// require a client certificate) make lockbench speak HTTPS.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/cmd/internal/clientflags"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// options are lockbench's flags.
type options struct {
	addrs, lockd, clients, prefix string
	spawn                         int
	duration, warmup              time.Duration
	spread, tls, shared, batch    bool
	keepalive, hold, massExpiry   int
	ttl                           time.Duration
	failover, pause, restart      bool
	lockdFlags                    string
	caCert, clientCert, clientKey string
	token                         string
	serveNull                     string
}

// parseFlags parses the command line into options.
func parseFlags() *options {
	o := &options{}
	flag.StringVar(&o.addrs, "addrs", "", "comma-separated HTTP addresses of running nodes")
	flag.IntVar(&o.spawn, "spawn", 0, "start a local cluster of this many lockd processes instead")
	flag.StringVar(&o.lockd, "lockd", "bin/lockd", "lockd binary for --spawn")
	flag.StringVar(&o.clients, "clients", "1,16,64", "comma-separated client counts to run")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long each run lasts")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before each run")
	flag.BoolVar(&o.spread, "spread", false, "spread clients over all nodes (followers forward) instead of using the leader")
	flag.StringVar(&o.prefix, "prefix", "bench", "lock name prefix")
	flag.IntVar(&o.hold, "hold", 0, "instead of pairs: take this many locks (64 per acquire, the largest --clients count in flight) and "+
		"report each node's memory; with --spawn also restart a follower once it holds a snapshot of them and time its catching up")
	flag.StringVar(&o.lockdFlags, "lockd-flags", "", "with --spawn: more flags for every node, e.g. \"--snapshot-threshold 1024 --snapshot-interval 5s\"")
	flag.BoolVar(&o.shared, "shared", false, "every client acquires the same name: each pair is a handoff, --clients N puts N-1 waiters on one name")
	flag.IntVar(&o.keepalive, "keepalive", 0, "instead of pairs: open this many sessions (TTL --ttl) and keep each alive every third of it, "+
		"with the largest --clients count as the requests in flight; reports keepalives/s, latency, errors, each node's CPU % and memory, and sessions lost")
	flag.DurationVar(&o.ttl, "ttl", defaultKeepaliveTTL, "with --keepalive: the sessions' TTL")
	flag.BoolVar(&o.batch, "batch", false, "with --keepalive: each client sends the keepalives due within a tenth of the period "+
		"(at most 500ms) in one POST /v1/sessions/keepalive, as the Go and Python clients do")
	flag.BoolVar(&o.failover, "failover", false, "with --keepalive and --spawn: kill the leader halfway through the measured window, follow the new one, "+
		"and report the sessions lost and the time until every session was kept alive again")
	flag.IntVar(&o.massExpiry, "mass-expiry", 0, "instead of pairs: open this many sessions (TTL --ttl), each holding a lock a live waiter asks for, "+
		"then stop their keepalives at once; reports the live clients' acquire latency before and during the storm, the waiters' grants, "+
		"the latest expiry past its TTL and the log entries per expired session")
	flag.BoolVar(&o.pause, "pause", false, "with --failover: pause the leader (SIGSTOP) instead of killing it, and resume it "+
		defaultPausedFor.String()+" after the others name a new leader, so that it wakes believing it leads")
	flag.BoolVar(&o.restart, "restart", false, "with --keepalive and --spawn: every session also holds a name of its own, and after the window "+
		"a follower is restarted (keepalives going on) once it holds a snapshot; reports the snapshot's wait and the catch-up")
	flag.BoolVar(&o.tls, "tls", false, "with --spawn: run the cluster with TLS and a gossip key, and speak HTTPS")
	flag.StringVar(&o.caCert, "ca-cert", "", "with --addrs: speak HTTPS, trusting the CA certificate(s) in `FILE`")
	flag.StringVar(&o.clientCert, "client-cert", "", "with --addrs: present the client certificate in `FILE`")
	flag.StringVar(&o.clientKey, "client-key", "", "with --addrs: the key of --client-cert, in `FILE`")
	var token clientflags.Token // with --addrs: the ACL token of a cluster run with --acl; never printed
	token.Register(flag.CommandLine)
	flag.StringVar(&o.serveNull, "serve-null", "", "instead of benchmarking: serve sessions, acquire and release from memory (no consensus, no disk) "+
		"on these comma-separated addresses until interrupted — the ceiling a load generator and HTTP allow on this machine")
	flag.Parse()
	o.token = token.Secret()
	return o
}

// run does the work; returning (not exiting) lets the deferred cluster
// stop run on every path, so no spawned lockd outlives lockbench.
func run() error {
	o := parseFlags()
	if o.serveNull != "" {
		return serveNull(strings.Split(o.serveNull, ","))
	}
	counts, err := parseCounts(o.clients)
	if err != nil {
		return err
	}
	a, nodes, err := external(o)
	if err != nil {
		return err
	}
	var spawned *localCluster
	if o.spawn > 0 {
		flags := strings.Fields(o.lockdFlags)
		if o.massExpiry > 0 && !slices.Contains(flags, "--max-wait") {
			flags = append(flags, "--max-wait", (massWait + time.Minute).String()) // the waiters wait through the storm
		}
		c, err := startCluster(o.lockd, o.spawn, o.tls, flags)
		if err != nil {
			return err
		}
		defer c.stop()
		a, nodes, spawned = api{tls: c.tls}, c.addrs, c
	}
	if len(nodes) == 0 {
		return errors.New("give --addrs or --spawn")
	}
	if o.pause && !o.failover {
		return errors.New("--pause is a kind of --failover: give both")
	}
	if o.restart && (o.keepalive == 0 || spawned == nil || o.failover) {
		return errors.New("--restart needs --keepalive and --spawn, and no --failover")
	}
	if o.failover && (o.keepalive == 0 || spawned == nil) {
		return errors.New("--failover needs --keepalive and --spawn (lockbench kills the leader it started)")
	}
	leader, err := waitLeader(a, nodes, 30*time.Second) // also: the cluster is up
	if err != nil {
		return err
	}
	targets := []string{leader}
	if o.spread {
		targets = nodes
	}
	fmt.Printf("lockbench: %d node(s), clients to %s over %s, %v per run\n",
		len(nodes), strings.Join(targets, ","), a.scheme(), o.duration)
	switch {
	case o.massExpiry > 0:
		return runMassExpiry(a, leader, o, slices.Max(counts))
	case o.keepalive > 0:
		return runKeepalives(a, targets, nodes, spawned, o, slices.Max(counts))
	case o.hold > 0:
		return runHold(a, targets, nodes, leader, spawned, o.hold, slices.Max(counts))
	}
	fmt.Printf("%8s %12s %12s %10s %10s %10s %8s\n", "clients", "pairs", "pairs/s", "p50", "p99", "max", "errors")
	for _, n := range counts {
		r, err := bench(a, targets, n, o.prefix, o.shared, o.warmup, o.duration)
		if err != nil {
			return err
		}
		fmt.Printf("%8d %12d %12.0f %10v %10v %10v %8d\n", n, r.pairs, r.rate(),
			r.quantile(0.50), r.quantile(0.99), r.quantile(1), r.errors)
	}
	return nil
}

// runHold runs and prints the --hold workload; with a spawned cluster it
// restarts a follower once it holds a snapshot of the locks.
func runHold(a api, targets, nodes []string, leader string, c *localCluster, n, conns int) error {
	r, err := hold(a, targets, nodes, n, conns)
	if err != nil {
		return err
	}
	fmt.Printf("%d locks held (%d refused) in %v: %.0f locks/s\n", r.locks, r.errors, r.took.Round(time.Millisecond), float64(r.locks)/r.took.Seconds())
	for _, node := range nodes {
		fmt.Printf("  %s: resident %.0f MB, Go heap in use %.0f MB\n", node, r.memory[node].rss/1e6, r.memory[node].heap/1e6)
	}
	if c == nil {
		return nil
	}
	return restartFollower(a, c, nodes, leader)
}

// restartFollower restarts a follower of leader once it holds a snapshot
// of everything applied so far, and prints how long the snapshot took to
// come and the restarted node to catch up.
func restartFollower(a api, c *localCluster, nodes []string, leader string) error {
	hc := a.client(2, 10*time.Second)
	defer hc.CloseIdleConnections()
	index, err := appliedIndex(hc, a, leader)
	if err != nil {
		return err
	}
	follower := slices.IndexFunc(nodes, func(s string) bool { return s != leader })
	start := time.Now()
	if err := c.snapshotAt(follower, index); err != nil {
		return err
	}
	fmt.Printf("  %s holds a snapshot at index %d or later (waited %v)\n", nodes[follower], index, time.Since(start).Round(time.Millisecond))
	took, err := c.restart(follower, func() bool {
		applied, err := appliedIndex(hc, a, nodes[follower])
		return err == nil && applied >= index
	})
	if err != nil {
		return err
	}
	fmt.Printf("  %s restarted and applied index %d in %v\n", nodes[follower], index, took.Round(time.Millisecond))
	return nil
}

// runKeepalives runs and prints the --keepalive workload.
func runKeepalives(a api, targets, nodes []string, c *localCluster, o *options, conns int) error {
	cfg := keepaliveConfig{n: o.keepalive, conns: conns, ttl: o.ttl, warmup: o.warmup, d: o.duration, spread: o.spread,
		batch: o.batch}
	if o.failover {
		cfg.kill = c.kill
	}
	if o.failover && o.pause {
		cfg.kill, cfg.resume, cfg.pausedFor = c.pause, c.resume, defaultPausedFor
	}
	if o.restart {
		// Each session holds a name of its own; after the window, with
		// the keepalives going on, a follower is restarted.
		cfg.hold = func(hc *http.Client, base string, i int, id string) error {
			return acquireOne(hc, base, id, fmt.Sprintf("%s/s%d", o.prefix, i), 0)
		}
		cfg.afterWindow = func() error {
			leader, err := waitAgreedLeader(a, nodes, 30*time.Second)
			if err != nil {
				return err
			}
			fmt.Printf("%d sessions and %d holds: restarting a follower\n", o.keepalive, o.keepalive)
			return restartFollower(a, c, nodes, leader)
		}
	}
	r, err := keepalives(a, targets, nodes, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("%d sessions opened in %v (%.0f/s) by %d clients, kept alive meanwhile\n", o.keepalive, r.opened.Round(time.Millisecond),
		float64(o.keepalive)/r.opened.Seconds(), conns)
	fmt.Printf("%d sessions (TTL %v, kept alive every %v): %.0f keepalives/s in %.0f requests/s, p50 %v, p99 %v, max %v, %d errors\n",
		o.keepalive, o.ttl, o.ttl/3, float64(r.sent)/r.elapsed.Seconds(), float64(r.requests)/r.elapsed.Seconds(),
		r.quantile(0.5), r.quantile(0.99), r.quantile(1), r.errors)
	for _, node := range nodes {
		cpu, ok := r.cpu[node]
		if !ok {
			fmt.Printf("  %s: killed\n", node)
			continue
		}
		m := r.memory[node]
		fmt.Printf("  %s: %.1f%% of one core, resident %.0f MB, Go heap in use %.0f MB (%.0f bytes per session more than before they were opened)\n",
			node, cpu, m.rss/1e6, m.heap/1e6, (m.heap-r.heapBefore[node])/float64(o.keepalive))
	}
	if f := r.failover; f != nil {
		how, event := "killed", "kill"
		if f.paused {
			how, event = "paused", "pause"
		}
		fmt.Printf("failover: %s %s; every survivor named a new leader after %v; %d keepalives failed after the %s "+
			"(%.0f requests turned away with Retry-After)\n", how, f.killed, f.elected.Round(time.Millisecond), f.errors, event, f.shed)
		if f.paused {
			fmt.Printf("resumed %s %v later: every node named %s %v after the resume\n",
				f.killed, defaultPausedFor, f.leader, f.rejoined.Round(time.Millisecond))
		}
		if f.rekept > 0 {
			fmt.Printf("every session kept alive again %v after the %s\n", f.rekept.Round(time.Millisecond), event)
		} else {
			fmt.Printf("%d of %d sessions kept alive again by the end\n", f.rekeptN, o.keepalive)
		}
	}
	fmt.Printf("sessions lost: %d\n", r.lost)
	return nil
}

// runMassExpiry runs and prints the --mass-expiry workload.
func runMassExpiry(a api, leader string, o *options, conns int) error {
	cfg := massConfig{n: o.massExpiry, conns: conns, probes: 16, ttl: o.ttl, warmup: o.warmup, quiet: o.duration}
	r, err := massExpiry(a, leader, cfg)
	if err != nil {
		return err
	}
	q := func(lat []time.Duration, p float64) time.Duration { return (&result{lat: lat}).quantile(p) }
	fmt.Printf("%d sessions (TTL %v) holding a lock each, %d waiters of %d names each, set up in %v\n",
		o.massExpiry, o.ttl, r.waiters, massGroup, r.setup.Round(time.Millisecond))
	fmt.Printf("live acquires, %d probes: quiet (before the set-up) p50 %v p99 %v (%d); storm (%v to %v after the stop) p50 %v p99 %v (%d); p99 ratio %.2f; %d errors\n",
		cfg.probes, q(r.quiet, 0.5), q(r.quiet, 0.99), len(r.quiet), r.stormFrom.Round(time.Millisecond), r.stormTo.Round(time.Millisecond),
		q(r.storm, 0.5), q(r.storm, 0.99), len(r.storm), float64(q(r.storm, 0.99))/float64(max(q(r.quiet, 0.99), 1)), r.probeErrors)
	fmt.Printf("waiters granted: %d of %d, the first %v and the last %v after the stop\n",
		r.granted, r.waiters, r.firstGrant.Round(time.Millisecond), r.lastGrant.Round(time.Millisecond))
	if r.waitErr != nil {
		fmt.Printf("  a waiter not granted: %v\n", r.waitErr)
	}
	fmt.Printf("latest expiry past TTL: at most %v (a waiter's grant after its sessions' last deadline)\n", r.latest.Round(time.Millisecond))
	entries := "an unknown number of log entries (the nodes do not export lockd_session_expiry_entries_total)"
	if r.entries >= 0 {
		entries = fmt.Sprintf("%.0f log entries (%.1f entries per 1,000 sessions)", r.entries, 1000*r.entries/max(r.expired, 1))
	}
	fmt.Printf("%.0f sessions expired in %s; leader %.1f%% of one core from the stop to the last grant\n",
		r.expired, entries, r.leaderCPU)
	return nil
}

// external returns how to reach the nodes in --addrs, and them, after
// checking that the TLS flags fit --spawn or --addrs.
func external(o *options) (api, []string, error) {
	files := o.caCert != "" || o.clientCert != "" || o.clientKey != ""
	switch {
	case o.spawn > 0 && files:
		return api{}, nil, errors.New("--ca-cert, --client-cert and --client-key are for --addrs; --spawn --tls makes its own")
	case o.spawn > 0:
		return api{}, nil, nil
	case o.tls && o.caCert == "":
		return api{}, nil, errors.New("--tls makes certificates for --spawn; with --addrs give --ca-cert")
	}
	cfg, err := client.TLSConfig(o.caCert, o.clientCert, o.clientKey)
	if err != nil {
		return api{}, nil, fmt.Errorf("--ca-cert, --client-cert, --client-key: %w", err)
	}
	return api{tls: cfg, token: o.token}, splitList(o.addrs), nil
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
