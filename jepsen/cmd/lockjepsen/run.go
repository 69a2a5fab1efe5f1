package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/history"
	"github.com/lockd/lockd/jepsen/nemesis"
	"github.com/lockd/lockd/jepsen/report"
	"github.com/lockd/lockd/jepsen/resource"
	"github.com/lockd/lockd/jepsen/workload"
)

// Negative controls: deliberately broken setups the checkers must flag.
const (
	negUnfenced    = "unfenced"     // the resource ignores fencing tokens
	negNoConsensus = "no-consensus" // lockd --unsafe no-consensus: every node grants on its own
	// negIntruderAdmin gives the intruder the management token, which may
	// act through any session: Ownership must flag its accepted attempts.
	negIntruderAdmin = "intruder-admin"
	// negWallClock is lockd --unsafe wall-clock: the leader stamps its
	// wall clock as read, so the clock nemesis's steps end hold TTLs
	// early (run it with --nemesis clock and --hold-ttl).
	negWallClock = "wall-clock"
	// negLoneReplacement: the membership nemesis brings nodes back as
	// fresh nodes that bootstrap a cluster of their own (lockd --unsafe
	// no-consensus on the replacement only; run it with --nemesis
	// membership). ACLs are off: the lone node shares no tokens.
	negLoneReplacement = "lone-replacement"
	// negLyingDisk is lockd --unsafe lying-disk: a node acknowledges raft
	// log writes that failed, so the disk nemesis's disk-crash and
	// disk-fail-crash lose acknowledged entries (run it with --nemesis
	// disk, or one of those two by name).
	negLyingDisk = "lying-disk"
	// negStaleSnapshot is lockd --unsafe stale-snapshot: every snapshot
	// holds the state of the one before it, so a node that catches up
	// through InstallSnapshot, or restarts, misses entries (run it with
	// --snapshot-threshold and partitions or kills).
	negStaleSnapshot = "stale-snapshot"
	// negUngatedUpgrade: the upgrade nemesis rolls a cluster of a build
	// before log format 3 (preACLRelease unless --upgrade-from says
	// otherwise; ACLs off) partly to this one run with --unsafe
	// no-format-gate, whose leader writes format 3 while an older voter
	// remains (nemesis.Config.UngatedUpgrade).
	negUngatedUpgrade = "ungated-upgrade"
)

// negatives lists the negative controls.
var negatives = []string{negUnfenced, negNoConsensus, negIntruderAdmin, negWallClock, negLoneReplacement, negLyingDisk,
	negUngatedUpgrade, negStaleSnapshot}

// withoutACL: runs with ACLs off (--acl=false), and the negative
// controls whose nodes share no tokens or predate ACLs.
func (c *runConfig) withoutACL() bool {
	return !c.acl || separateTables(c.negative) || c.negative == negUngatedUpgrade
}

// separateTables: the negative controls whose nodes keep tables of their
// own, which never converge.
func separateTables(negative string) bool {
	return negative == negNoConsensus || negative == negLoneReplacement
}

// runConfig is what the run flags say.
type runConfig struct {
	nodes           int
	workload        string
	nemeses         []string
	duration        time.Duration
	clients         int
	ttl, wait, hold time.Duration
	holdTTL         time.Duration
	// snapshots: the nodes' --snapshot-threshold and --trailing-logs (0:
	// raft's), snapshotting every second when set.
	snapshotThreshold, trailingLogs uint64
	sampleMetrics                   time.Duration // 0: no soak check
	upgradeFrom                     string        // git ref of the build upgrade runs start on
	acl                             bool          // ACLs on (compose's default)
	interval, faultDuration         time.Duration
	liveness, linTimeout            time.Duration
	seed                            int64
	negative                        string
	out, dir                        string
	project, subnet, ports          string
	build, keep, verbose            bool
}

func parseRunFlags(args []string) (*runConfig, error) {
	c := &runConfig{}
	fs := flag.NewFlagSet("lockjepsen", flag.ContinueOnError)
	fs.IntVar(&c.nodes, "nodes", 3, "cluster size: 3 or 5")
	fs.StringVar(&c.workload, "workload", "mutex", "one of "+strings.Join(workload.Names, ", "))
	nem := fs.String("nemesis", "partition,kill,pause", `comma-separated fault kinds: partition, kill, pause, clock, membership, disk, upgrade, mixed (partition, kill and pause), or none; a fault's own name (e.g. disk-fail) stands for that fault alone`)
	fs.DurationVar(&c.duration, "time", 60*time.Second, "how long the workload runs under faults (then heal, final phase, checks)")
	fs.IntVar(&c.clients, "clients", 6, "concurrent client workers")
	fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "session TTL of the clients (client pauses last TTL+1s..2×TTL)")
	fs.DurationVar(&c.wait, "wait", 5*time.Second, "server-side wait of each acquire")
	fs.DurationVar(&c.hold, "hold", 50*time.Millisecond, "mean time a client holds a lock (and idles between rounds)")
	fs.Uint64Var(&c.snapshotThreshold, "snapshot-threshold", 0, "the nodes' --snapshot-threshold, checked every second (0: raft's default, every 2m); a node cut off longer than --trailing-logs entries comes back through InstallSnapshot")
	fs.Uint64Var(&c.trailingLogs, "trailing-logs", 0, "the nodes' --trailing-logs (0: raft's default)")
	fs.StringVar(&c.upgradeFrom, "upgrade-from", "", "git ref of the build the nodes start on in upgrade runs (--nemesis upgrade rolls them to this one; default "+
		previousRelease+", or "+preACLRelease+" for --negative "+negUngatedUpgrade+")")
	fs.BoolVar(&c.acl, "acl", true, "ACLs on, as docker-compose.yml starts them; false for --upgrade-from a build before ACLs")
	fs.DurationVar(&c.sampleMetrics, "sample-metrics", 0, "sample every node's memory, goroutines and open files from /metrics this often, and check they stay flat (the soak check; 0: off)")
	fs.DurationVar(&c.holdTTL, "hold-ttl", 0, "hold TTL of every acquire (0: none); holders use the resource only before their grant's deadline")
	fs.DurationVar(&c.interval, "interval", 8*time.Second, "longest quiet time between faults")
	fs.DurationVar(&c.faultDuration, "fault-duration", 12*time.Second, "longest fault")
	fs.DurationVar(&c.liveness, "liveness", 30*time.Second, "bound on each final-phase acquire after the heal")
	fs.DurationVar(&c.linTimeout, "lin-timeout", 3*time.Minute, "bound on the linearizability search (then: unknown)")
	fs.Int64Var(&c.seed, "seed", 0, "random seed of the workload and the nemesis (0: from the clock)")
	fs.StringVar(&c.negative, "negative", "", `negative control: "`+negUnfenced+`" (resource ignores tokens), "`+negNoConsensus+`" (lockd grants without consensus), "`+
		negIntruderAdmin+`" (the intruder acts with the management token), "`+negWallClock+`" (lockd stamps the leader's wall clock), "`+
		negLoneReplacement+`" (replaced nodes form clusters of their own), "`+negLyingDisk+
		`" (lockd acknowledges log writes that failed), "`+negUngatedUpgrade+
		`" (an upgrade without the version gate) or "`+negStaleSnapshot+
		`" (every snapshot holds the state of the one before); the run must be flagged invalid`)
	fs.StringVar(&c.out, "out", "", "results directory (default: <repo>/jepsen/results)")
	fs.StringVar(&c.dir, "dir", "", "repository root holding docker-compose.yml (default: found from the working directory)")
	fs.StringVar(&c.project, "project", "lockd-jepsen", "docker compose project name")
	fs.StringVar(&c.subnet, "subnet", "10.77.40", "first three octets of the cluster network")
	fs.StringVar(&c.ports, "port-prefix", "174", "host ports of the nodes' HTTP APIs: 127.0.0.1:<prefix>k for node k")
	fs.BoolVar(&c.build, "build", true, "build bin/lockd and the lockd:dev image first")
	fs.BoolVar(&c.keep, "keep", false, "leave the cluster running after the run")
	fs.BoolVar(&c.verbose, "v", false, "log client retries and every fault")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.nodes != 3 && c.nodes != 5 {
		return nil, fmt.Errorf("--nodes %d: want 3 or 5", c.nodes)
	}
	if _, err := workload.New(c.workload); err != nil {
		return nil, err
	}
	if *nem != "none" && *nem != "" {
		c.nemeses = strings.Split(*nem, ",")
		if err := nemesis.ValidKinds(c.nemeses); err != nil {
			return nil, err
		}
		if err := nemesis.CheckOffered(c.nemeses, c.nodes, !c.keep); err != nil {
			return nil, fmt.Errorf("%w (the EIO faults need the faultfs mirror, which --keep leaves out; member-shrink needs 5 nodes, member-grow 3)", err)
		}
	}
	if err := c.checkNegative(); err != nil {
		return nil, err
	}
	if c.clients < 1 || c.duration <= 0 || c.ttl < time.Second || c.holdTTL < 0 {
		return nil, errors.New("--clients must be ≥ 1, --time > 0, --ttl ≥ 1s, --hold-ttl ≥ 0")
	}
	return c, c.fillDefaults()
}

// fillDefaults sets what was left to its default: the seed, the build
// upgrades start on, the repository and results directories.
func (c *runConfig) fillDefaults() error {
	if c.seed == 0 {
		c.seed = time.Now().UnixNano()
	}
	if c.upgradeFrom == "" {
		c.upgradeFrom = previousRelease
		if c.negative == negUngatedUpgrade {
			c.upgradeFrom = preACLRelease
		}
	}
	if c.dir == "" {
		d, err := repoRoot()
		if err != nil {
			return err
		}
		c.dir = d
	}
	if c.out == "" {
		c.out = filepath.Join(c.dir, "jepsen", "results")
	}
	return nil
}

// checkNegative refuses a negative control that is unknown, or that its
// run could not expose: it would end "not flagged" whatever lockd does.
func (c *runConfig) checkNegative() error {
	if c.negative != "" && !slices.Contains(negatives, c.negative) {
		return fmt.Errorf("--negative %q: want one of %q", c.negative, negatives)
	}
	needs := map[string]string{negWallClock: nemesis.KindClock, negLyingDisk: nemesis.KindDisk,
		negUngatedUpgrade: nemesis.KindUpgrade, negLoneReplacement: nemesis.KindMembership}
	if kind, ok := needs[c.negative]; ok && !nemesis.Uses(c.nemeses, kind) {
		return fmt.Errorf("--negative %s needs --nemesis %s", c.negative, kind)
	}
	if c.negative == negLyingDisk && !slices.Contains(c.nemeses, nemesis.KindDisk) &&
		!slices.Contains(c.nemeses, nemesis.FaultDiskCrash) && !slices.Contains(c.nemeses, nemesis.FaultDiskFailCrash) {
		return fmt.Errorf("--negative %s needs a power loss after the lie: --nemesis disk, %s or %s", negLyingDisk,
			nemesis.FaultDiskCrash, nemesis.FaultDiskFailCrash)
	}
	if c.negative == negStaleSnapshot && (c.snapshotThreshold == 0 ||
		!nemesis.Uses(c.nemeses, nemesis.KindPartition) && !nemesis.Uses(c.nemeses, nemesis.KindKill)) {
		return fmt.Errorf("--negative %s needs --snapshot-threshold and --nemesis partition or kill (a node restored from a snapshot)", negStaleSnapshot)
	}
	// A hold counts until its hold TTL after the acquire's invoke: one
	// granted after a long wait and held a while must still count when
	// the step ends it, or no run could show the overlap.
	if c.negative == negWallClock && c.holdTTL <= c.wait+2*c.hold {
		return fmt.Errorf("--negative %s needs --hold-ttl above --wait + 2×--hold (%v): a hold must still count when the step ends it", negWallClock, c.wait+2*c.hold)
	}
	if step := nemesis.WallClockStep(c.holdTTL); c.negative == negWallClock && c.ttl < 2*step {
		return fmt.Errorf("--negative %s needs --ttl of at least %v, twice its clock step: the step must end holds, not sessions", negWallClock, 2*step)
	}
	if c.negative == negIntruderAdmin && !c.acl {
		return fmt.Errorf("--negative %s needs ACLs (the intruder has a token)", negIntruderAdmin)
	}
	return nil
}

// repoRoot walks up from the working directory to docker-compose.yml.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "docker-compose.yml")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("no docker-compose.yml above the working directory (use --dir)")
		}
		d = parent
	}
}

// runCmd does one run; the exit code says whether it was judged as
// expected.
func runCmd(args []string) (int, error) {
	cfg, err := parseRunFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, nil
		}
		return 2, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	started := time.Now().UTC()
	id := runID(cfg, started)
	outDir := filepath.Join(cfg.out, id)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return 1, err
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, a...))
	}
	logf("run %s (seed %d) -> %s", id, cfg.seed, outDir)

	if cfg.build {
		logf("building bin/lockd and the lockd:dev image")
		if err := compose.BuildImage(ctx, cfg.dir); err != nil {
			return 1, fmt.Errorf("build: %w", err)
		}
	}
	cl := &compose.Cluster{Dir: cfg.dir, Project: cfg.project, Nodes: cfg.nodes, Subnet: cfg.subnet,
		PortPrefix: cfg.ports}
	if nemesis.Uses(cfg.nemeses, nemesis.KindUpgrade) {
		previousImage := "lockd:at-" + strings.Map(imageTagRune, cfg.upgradeFrom) // runs side by side may start on other builds
		logf("building %s from %s, the build upgrade runs start on", previousImage, cfg.upgradeFrom)
		if err := compose.BuildImageAt(ctx, cfg.dir, cfg.upgradeFrom, previousImage); err != nil {
			return 1, fmt.Errorf("build %s: %w", previousImage, err)
		}
		cl.Images = map[string]string{}
		for _, n := range cl.Names() {
			cl.Images[n] = previousImage
		}
	}
	cl.Env = clusterEnv(cfg)
	_ = cl.Down(ctx) // a cluster left over by an interrupted run
	if nemesis.Uses(cfg.nemeses, nemesis.KindDisk) {
		disks, err := attachSmallDisks(cl, cfg, logf)
		defer unmountDisks(disks, cfg, logf)
		if err != nil {
			return 1, err
		}
	}
	defer tearDown(cfg, cl, logf)
	logf("starting %d nodes (project %s)", cfg.nodes, cfg.project)
	if err := up(ctx, cl, cfg.negative == negNoConsensus); err != nil {
		saveLogs(cl, outDir)
		return 1, fmt.Errorf("cluster up: %w", err)
	}

	var toks *workload.Tokens
	if !cfg.withoutACL() {
		if toks, err = setupACL(ctx, cl, cfg.clients, logf); err != nil {
			saveLogs(cl, outDir)
			return 1, fmt.Errorf("ACL setup: %w", err)
		}
		logf("ACLs bootstrapped: %d worker tokens and an intruder's, write on %q", len(toks.Workers), workload.TokenPrefix)
		cl.Token = toks.Admin // the clock hook is an operator call
	}
	sum, err := execute(ctx, cfg, cl, toks, outDir, id, started, logf)
	if err != nil {
		saveLogs(cl, outDir)
		return 1, err
	}
	printVerdict(sum, outDir)
	return judgedAsExpected(cfg, sum), nil
}

// previousRelease is the build upgrade runs start on by default: the
// last commit before the clock, membership, disk and upgrade faults.
const (
	previousRelease = "77099b9"
	// preACLRelease is the last commit before ACLs and log format 3
	// (FormatACL): an upgrade from it crosses a log format change.
	preACLRelease = "27210eb"
)

// imageTagRune keeps the runes a docker tag may hold and maps the rest
// to '-'.
func imageTagRune(r rune) rune {
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
		return r
	}
	return '-'
}

// clusterEnv is the compose environment a run's nodes need: snapshot
// tuning, the clock hook for clock faults, the unsafe mode of a negative
// control.
func clusterEnv(cfg *runConfig) []string {
	var env []string
	if cfg.snapshotThreshold > 0 {
		env = append(env, fmt.Sprintf("LOCKD_SNAPSHOT_THRESHOLD=%d", cfg.snapshotThreshold), "LOCKD_SNAPSHOT_INTERVAL=1s")
	}
	if cfg.trailingLogs > 0 {
		env = append(env, fmt.Sprintf("LOCKD_TRAILING_LOGS=%d", cfg.trailingLogs))
	}
	if nemesis.Uses(cfg.nemeses, nemesis.KindClock) {
		env = append(env, "LOCKD_TEST_CLOCK_HOOK=1")
	}
	switch cfg.negative {
	case negNoConsensus:
		// Each node is a cluster of its own: no tokens would be shared.
		env = append(env, "LOCKD_UNSAFE=no-consensus")
	case negWallClock:
		env = append(env, "LOCKD_UNSAFE=wall-clock")
	case negLyingDisk:
		env = append(env, "LOCKD_UNSAFE=lying-disk")
	case negStaleSnapshot:
		env = append(env, "LOCKD_UNSAFE=stale-snapshot")
	}
	if cfg.withoutACL() {
		env = append(env, "LOCKD_ACL=0")
	}
	return env
}

// runID names a run (and its directory) after its start, workload,
// nemesis, size and negative control.
func runID(cfg *runConfig, started time.Time) string {
	nemName := "none"
	if len(cfg.nemeses) > 0 {
		nemName = strings.Join(cfg.nemeses, "+")
	}
	id := fmt.Sprintf("%s-%s-%s-n%d", started.Format("20060102T150405Z"), cfg.workload, nemName, cfg.nodes)
	if cfg.negative != "" {
		id += "-neg-" + cfg.negative
	}
	return id
}

// tearDown stops the cluster unless --keep.
func tearDown(cfg *runConfig, cl *compose.Cluster, logf func(string, ...any)) {
	if cfg.keep {
		logf("cluster %s left running (--keep)", cfg.project)
		return
	}
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Down(dctx); err != nil {
		logf("tear down: %v", err)
	}
}

// judgedAsExpected returns the exit code of a judged run: 0 when it is
// valid, or for a negative control when some checker flagged it.
func judgedAsExpected(cfg *runConfig, sum report.Summary) int {
	switch {
	case cfg.negative != "" && sum.Flagged():
		fmt.Printf("negative control %q was flagged invalid, as it must be\n", cfg.negative)
		return 0
	case cfg.negative != "" && sum.Control != nil && !sum.Control.Exercised:
		fmt.Printf("negative control %q was not exercised: its condition did not happen in this run (not flagged either)\n", cfg.negative)
		return exitNotExercised
	case cfg.negative != "":
		fmt.Printf("negative control %q was exercised and NOT flagged: the checkers missed it\n", cfg.negative)
		return 1
	case sum.Valid:
		return 0
	}
	return 1
}

// up starts the cluster; under no-consensus every node is a cluster of
// its own, so only each node's own leadership is awaited.
func up(ctx context.Context, cl *compose.Cluster, standalone bool) error {
	if !standalone {
		return cl.Up(ctx)
	}
	if _, err := cl.Compose(ctx, append([]string{"up", "-d"}, cl.Names()...)...); err != nil {
		return err
	}
	return waitEach(ctx, cl)
}

// waitEach waits until every node knows a leader, its own or not.
func waitEach(ctx context.Context, cl *compose.Cluster) error {
	wctx, cancel := context.WithTimeout(ctx, compose.UpTimeout)
	defer cancel()
	for _, n := range cl.Names() {
		if err := cl.WaitNode(wctx, n); err != nil {
			return err
		}
	}
	return nil
}

// execute runs the workload under the nemesis, the final phase and the
// checks, and writes the report.
func execute(ctx context.Context, cfg *runConfig, cl *compose.Cluster, toks *workload.Tokens, outDir, id string, started time.Time,
	logf func(string, ...any)) (report.Summary, error) {
	rec, err := history.NewRecorder(filepath.Join(outDir, "history.jsonl"))
	if err != nil {
		return report.Summary{}, err
	}
	defer rec.Close()
	w, _ := workload.New(cfg.workload)
	res := resource.New(cfg.negative != negUnfenced)
	pauses := &workload.Pauses{}
	clients, err := newClients(cfg, cl, toks, rec, res, w, pauses)
	if err != nil {
		return report.Summary{}, err
	}

	logf("workload %s with %d clients for %v; nemesis %v", cfg.workload, cfg.clients, cfg.duration, cfg.nemeses)
	mctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	faults := mainPhase(mctx, cfg, cl, rec, clients, pauses, logf)
	logf("faults: %v", faults)
	if ctx.Err() != nil {
		return report.Summary{}, ctx.Err()
	}

	nodes := finalPhase(ctx, cfg, cl, rec, res, clients, logf)
	if err := rec.Close(); err != nil {
		return report.Summary{}, err
	}
	events := rec.Events()
	logf("checking %d events", len(events))
	ccfg := checker.Config{Workload: cfg.workload, Limit: w.Limit(), Fenced: res.Fenced(), OutDir: outDir,
		LinearizabilityTimeout: cfg.linTimeout, LivenessBound: cfg.liveness, Intruder: toks != nil,
		SessionTTL: cfg.ttl}
	results := checker.All(events, ccfg)
	if !separateTables(cfg.negative) {
		results = append(results, checker.Convergence(nodes))
	}
	saveLogs(cl, outDir)
	run := report.Run{ID: id, Workload: cfg.workload, Nemesis: cfg.nemeses, Nodes: cl.Names(), Duration: cfg.duration,
		Seed: cfg.seed, Clients: cfg.clients, Started: started, Negative: cfg.negative, Command: os.Args,
		Commit: commit(cfg.dir), SnapshotInstalls: snapshotInstalls(filepath.Join(outDir, "logs"), cl.Names())}
	if len(run.SnapshotInstalls) > 0 {
		logf("nodes that caught up through InstallSnapshot: %v", run.SnapshotInstalls)
	}
	sum := report.Summarize(run, events, results)
	if cfg.negative != "" {
		sum.Control = judgeControl(cfg.negative, events)
	}
	if err := report.WriteJSON(outDir, sum); err != nil {
		return sum, err
	}
	if err := report.WriteHTML(outDir, sum, events); err != nil {
		return sum, err
	}
	return sum, nil
}

// newClients makes the workload's clients of the cluster's nodes.
func newClients(cfg *runConfig, cl *compose.Cluster, toks *workload.Tokens, rec *history.Recorder, res *resource.Resource,
	w workload.Workload, pauses *workload.Pauses) (*workload.Clients, error) {
	var eps []string
	for _, n := range cl.Names() {
		eps = append(eps, cl.HTTPAddr(n))
	}
	conf, err := cl.TLS()
	if err != nil {
		return nil, fmt.Errorf("cluster TLS: %w", err)
	}
	clientLog := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		clientLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	env := &workload.Env{Rec: rec, Res: res, Endpoints: eps, TTL: cfg.ttl, Wait: cfg.wait, Hold: cfg.hold, HoldTTL: cfg.holdTTL,
		Pauses: pauses, Seed: uint64(cfg.seed), Log: clientLog, TLS: conf}
	if toks != nil {
		env.Tokens, env.Intruder = toks.Workers, toks.Intruder
		if cfg.negative == negIntruderAdmin {
			env.Intruder = toks.Admin
		}
	}
	return workload.NewClients(env, w, cfg.clients)
}

// mainPhase runs the workload under faults until ctx ends; it returns
// the faults applied by name.
func mainPhase(ctx context.Context, cfg *runConfig, cl *compose.Cluster, rec *history.Recorder,
	clients *workload.Clients, pauses *workload.Pauses, logf func(string, ...any)) map[string]int {
	faults := map[string]int{}
	nemDone := make(chan error, 1)
	if len(cfg.nemeses) > 0 {
		ncfg := nemesis.Config{Kinds: cfg.nemeses, Rand: rand.New(rand.NewSource(cfg.seed)),
			Interval: cfg.interval, FaultDuration: cfg.faultDuration, ClientPause: pauses.Pause,
			SessionTTL: cfg.ttl, LoneReplacements: cfg.negative == negLoneReplacement, HoldTTL: cfg.holdTTL}
		if cfg.negative == negWallClock || cfg.negative == negLoneReplacement {
			ncfg.Aim = cfg.negative // the nemesis aims at the control's condition (nemesis/aim.go)
		}
		ncfg.UngatedUpgrade = cfg.negative == negUngatedUpgrade
		if cfg.verbose {
			ncfg.Logf = logf
		}
		go func() {
			var err error
			faults, err = nemesis.Run(ctx, cl, ncfg, func(e history.Event) { rec.Add(e) })
			nemDone <- err
		}()
	} else {
		nemDone <- nil
	}
	if cfg.sampleMetrics > 0 {
		go sampleMetrics(ctx, cl, rec, cfg.sampleMetrics)
	}
	clients.Run(ctx)
	if err := <-nemDone; err != nil {
		logf("nemesis cleanup: %v", err)
	}
	return faults
}

// sampleMetrics records every node's history.SampledMetrics every
// `every` until ctx ends (a node that does not answer is skipped).
func sampleMetrics(ctx context.Context, cl *compose.Cluster, rec *history.Recorder, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, n := range cl.Names() {
			m, err := cl.Metrics(ctx, n, history.SampledMetrics)
			if err != nil {
				continue
			}
			values := map[string][]int64{}
			for k, v := range m {
				values[k] = []int64{int64(v)}
			}
			rec.Add(history.Event{Type: history.Info, Process: history.Harness, F: history.Metrics, Node: n, Values: values})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// finalPhase heals the cluster and has every client acquire its lock,
// then closes the clients, reads the resource and waits for the nodes to
// converge; it returns their last reports.
func finalPhase(ctx context.Context, cfg *runConfig, cl *compose.Cluster, rec *history.Recorder,
	res *resource.Resource, clients *workload.Clients, logf func(string, ...any)) []checker.NodeState {
	hctx, hcancel := context.WithTimeout(ctx, 90*time.Second)
	var err error
	switch cfg.negative {
	case negNoConsensus:
		err = up(hctx, cl, true)
	case negLoneReplacement:
		// No one cluster to wait for (and compose up would recreate the
		// lone nodes); a node left without a quorum never knows a leader.
		wctx, cancel := context.WithTimeout(hctx, 15*time.Second)
		err = waitEach(wctx, cl)
		cancel()
	default:
		err = cl.WaitHealthy(hctx)
	}
	hcancel()
	if err != nil {
		logf("cluster not healthy after the heal: %v (the liveness check will say)", err)
	}
	rec.Add(history.Event{Type: history.Info, Process: history.Harness, F: history.Phase, Fault: "final"})
	logf("final phase: every client acquires within %v", cfg.liveness)
	clients.Final(ctx, cfg.liveness)
	clients.Close(ctx)
	workload.FinalRead(rec, res)
	if separateTables(cfg.negative) { // they never converge
		return nil
	}
	return converge(ctx, cl, 30*time.Second)
}

// converge polls every node until all report the same applied index and
// digest (followers apply a moment after the leader), or the bound ends;
// it returns the last reports.
func converge(ctx context.Context, cl *compose.Cluster, bound time.Duration) []checker.NodeState {
	deadline := time.Now().Add(bound)
	for {
		var out []checker.NodeState
		same := true
		for _, n := range cl.Names() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := cl.Status(sctx, n)
			cancel()
			ns := checker.NodeState{Node: n}
			if err != nil {
				ns.Err = err.Error()
				same = false
			} else {
				ns.AppliedIndex, ns.Digest = st.AppliedIndex, st.Digest
			}
			if len(out) > 0 && (ns.AppliedIndex != out[0].AppliedIndex || ns.Digest != out[0].Digest) {
				same = false
			}
			out = append(out, ns)
		}
		if same || time.Now().After(deadline) || ctx.Err() != nil {
			return out
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// snapshotInstalls counts, per node, the snapshots it installed from
// the leader (hashicorp/raft logs "Installed remote snapshot"), in the
// node logs saved in dir.
func snapshotInstalls(dir string, nodes []string) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		b, err := os.ReadFile(filepath.Join(dir, n+".log"))
		if err != nil {
			continue
		}
		if k := strings.Count(string(b), "Installed remote snapshot"); k > 0 {
			out[n] = k
		}
	}
	return out
}

func saveLogs(cl *compose.Cluster, outDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.SaveLogs(ctx, filepath.Join(outDir, "logs")); err != nil {
		fmt.Fprintln(os.Stderr, "lockjepsen: saving node logs:", err)
	}
}

// commit is the repository's HEAD (with "+dirty" for local changes), for
// the report.
func commit(dir string) string {
	out, err := exec.Command("git", "-C", dir, "describe", "--always", "--dirty=+dirty").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func printVerdict(s report.Summary, outDir string) {
	for _, r := range s.Results {
		keys := make([]string, 0, len(r.Counts))
		for k := range r.Counts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var counts []string
		for _, k := range keys {
			counts = append(counts, fmt.Sprintf("%s=%d", k, r.Counts[k]))
		}
		fmt.Printf("%-16s %-8s %s\n", r.Checker, r.Verdict, strings.Join(counts, " "))
		for i, a := range r.Anomalies {
			if i == 5 {
				fmt.Printf("%16s ... %d more in results.json\n", "", len(r.Anomalies)-5)
				break
			}
			fmt.Printf("%16s %s\n", "", a)
		}
	}
	if c := s.Control; c != nil {
		fmt.Printf("control %s: exercised=%v evidence=%q missed=%q\n", c.Name, c.Exercised, c.Evidence, c.Missed)
	}
	verdict := "VALID"
	if !s.Valid {
		verdict = "INVALID"
	}
	fmt.Printf("%s: %s (report: %s)\n", s.ID, verdict, filepath.Join(outDir, "report.html"))
}
