package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"os/signal"
	"path/filepath"
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

// run is one run of the suite: its flags, its cluster and clients, the
// history they record and where its results go. runCmd makes one, and
// its phases are methods: start (build, cluster up, ACLs), mainPhase (the
// workload under the nemesis), finalPhase (heal, every client acquires,
// converge) and judge (checkers, the control's condition, results).
type run struct {
	cfg     *runConfig
	id      string
	outDir  string
	started time.Time
	logf    func(format string, args ...any)

	cl      *compose.Cluster
	toks    *workload.Tokens // nil with ACLs off
	rec     *history.Recorder
	res     *resource.Resource
	w       workload.Workload
	pauses  *workload.Pauses
	clients *workload.Clients
}

// newRun names a run after cfg and its start, and makes its results
// directory.
func newRun(cfg *runConfig, started time.Time) (*run, error) {
	r := &run{cfg: cfg, started: started, id: runID(cfg, started)}
	r.outDir = filepath.Join(cfg.out, r.id)
	r.logf = func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, a...))
	}
	r.cl = &compose.Cluster{Dir: cfg.dir, Project: cfg.project, Nodes: cfg.nodes, Subnet: cfg.subnet,
		PortPrefix: cfg.ports, Env: clusterEnv(cfg)}
	r.w, _ = workload.New(cfg.workload) // parseRunFlags checked the name
	r.res = resource.New(cfg.negative != negUnfenced)
	r.pauses = &workload.Pauses{}
	return r, os.MkdirAll(r.outDir, 0o755)
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
	r, err := newRun(cfg, time.Now().UTC())
	if err != nil {
		return 1, err
	}
	r.logf("run %s (seed %d) -> %s", r.id, cfg.seed, r.outDir)
	if err := r.build(ctx); err != nil {
		return 1, err
	}
	_ = r.cl.Down(ctx) // a cluster left over by an interrupted run
	if nemesis.Uses(cfg.nemeses, nemesis.KindDisk) || nemesis.Uses(cfg.nemeses, nemesis.KindPower) {
		disks, err := attachSmallDisks(r.cl, cfg, r.logf)
		defer unmountDisks(disks, cfg, r.logf)
		if err != nil {
			return 1, err
		}
	}
	defer tearDown(cfg, r.cl, r.logf)
	sum, err := r.execute(ctx)
	if err != nil {
		saveLogs(r.cl, r.outDir)
		return 1, err
	}
	printVerdict(sum, r.outDir)
	return judgedAsExpected(cfg, sum), nil
}

// build makes the images the run starts on: this build's (unless
// --build=false) and, for upgrades, the older one's.
func (r *run) build(ctx context.Context) error {
	if r.cfg.build {
		r.logf("building the suite's lockd and the %s image", compose.DefaultImage)
		if err := compose.BuildImage(ctx, r.cfg.dir); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	if !nemesis.Uses(r.cfg.nemeses, nemesis.KindUpgrade) {
		return nil
	}
	previousImage := "lockd:at-" + strings.Map(imageTagRune, r.cfg.upgradeFrom) // runs side by side may start on other builds
	r.logf("building %s from %s, the build upgrade runs start on", previousImage, r.cfg.upgradeFrom)
	if err := compose.BuildImageAt(ctx, r.cfg.dir, r.cfg.upgradeFrom, previousImage); err != nil {
		return fmt.Errorf("build %s: %w", previousImage, err)
	}
	r.cl.Images = map[string]string{}
	for _, n := range r.cl.Names() {
		r.cl.Images[n] = previousImage
	}
	return nil
}

// start brings the cluster up and, with ACLs on, bootstraps them and
// makes the workers' and the intruder's tokens.
func (r *run) start(ctx context.Context) error {
	r.logf("starting %d nodes (project %s)", r.cfg.nodes, r.cfg.project)
	if err := up(ctx, r.cl, r.cfg.negative == negNoConsensus); err != nil {
		return fmt.Errorf("cluster up: %w", err)
	}
	if r.cfg.withoutACL() {
		return nil
	}
	toks, err := setupACL(ctx, r.cl, r.cfg.clients, r.logf)
	if err != nil {
		return fmt.Errorf("ACL setup: %w", err)
	}
	r.logf("ACLs bootstrapped: %d worker tokens and an intruder's, write on %q", len(toks.Workers), workload.TokenPrefix)
	r.toks = toks
	r.cl.Token = toks.Admin // the clock hook is an operator call
	return nil
}

// execute starts the cluster, runs the workload under the nemesis, the
// final phase and the checks, and writes the results.
func (r *run) execute(ctx context.Context) (report.Summary, error) {
	if err := r.start(ctx); err != nil {
		return report.Summary{}, err
	}
	rec, err := history.NewRecorder(filepath.Join(r.outDir, "history.jsonl"))
	if err != nil {
		return report.Summary{}, err
	}
	defer rec.Close()
	r.rec = rec
	if r.clients, err = r.newClients(); err != nil {
		return report.Summary{}, err
	}
	r.logf("workload %s with %d clients for %v; nemesis %v", r.cfg.workload, r.cfg.clients, r.cfg.duration, r.cfg.nemeses)
	mctx, cancel := context.WithTimeout(ctx, r.cfg.duration)
	defer cancel()
	faults := r.mainPhase(mctx)
	r.logf("faults: %v", faults)
	if ctx.Err() != nil {
		return report.Summary{}, ctx.Err()
	}
	nodes := r.finalPhase(ctx)
	if err := rec.Close(); err != nil {
		return report.Summary{}, err
	}
	saveLogs(r.cl, r.outDir)
	return r.judge(rec.Events(), nodes)
}

// judge runs the checkers over events (and, unless the control keeps
// separate tables, the nodes' convergence), reads the control's
// condition, and writes results.json and report.html.
func (r *run) judge(events []history.Event, nodes []checker.NodeState) (report.Summary, error) {
	r.logf("checking %d events", len(events))
	ccfg := checker.Config{Workload: r.cfg.workload, Limit: r.w.Limit(), Fenced: r.res.Fenced(), OutDir: r.outDir,
		LinearizabilityTimeout: r.cfg.linTimeout, LivenessBound: r.cfg.liveness, Intruder: r.toks != nil,
		SessionTTL: r.cfg.ttl}
	results := checker.All(events, ccfg)
	if !separateTables(r.cfg.negative) {
		results = append(results, checker.Convergence(nodes))
	}
	info := report.Run{ID: r.id, Workload: r.cfg.workload, Nemesis: r.cfg.nemeses, Nodes: r.cl.Names(),
		Duration: r.cfg.duration, Seed: r.cfg.seed, Clients: r.cfg.clients, Started: r.started,
		Negative: r.cfg.negative, Command: os.Args, Commit: commit(r.cfg.dir),
		SnapshotInstalls: snapshotInstalls(filepath.Join(r.outDir, "logs"), r.cl.Names())}
	if len(info.SnapshotInstalls) > 0 {
		r.logf("nodes that caught up through InstallSnapshot: %v", info.SnapshotInstalls)
	}
	sum := report.Summarize(info, events, results)
	if r.cfg.negative != "" {
		sum.Control = judgeControl(r.cfg.negative, events)
	}
	if err := report.WriteJSON(r.outDir, sum); err != nil {
		return sum, err
	}
	return sum, report.WriteHTML(r.outDir, sum, events)
}

// newClients makes the workload's clients of the cluster's nodes.
func (r *run) newClients() (*workload.Clients, error) {
	var eps []string
	for _, n := range r.cl.Names() {
		eps = append(eps, r.cl.HTTPAddr(n))
	}
	conf, err := r.cl.TLS()
	if err != nil {
		return nil, fmt.Errorf("cluster TLS: %w", err)
	}
	clientLog := slog.New(slog.DiscardHandler)
	if r.cfg.verbose {
		clientLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	env := &workload.Env{Rec: r.rec, Res: r.res, Endpoints: eps, TTL: r.cfg.ttl, Wait: r.cfg.wait, Hold: r.cfg.hold,
		HoldTTL: r.cfg.holdTTL, Pauses: r.pauses, Seed: uint64(r.cfg.seed), Log: clientLog, TLS: conf}
	if r.toks != nil {
		env.Tokens, env.Intruder, env.Observer = r.toks.Workers, r.toks.Intruder, r.toks.Admin
		if r.cfg.negative == negIntruderAdmin {
			env.Intruder = r.toks.Admin
		}
	}
	return workload.NewClients(env, r.w, r.cfg.clients)
}

// nemesisConfig is the nemesis's schedule as the flags say: its kinds,
// seed and timing, and the aim or the breakage of a negative control.
func (r *run) nemesisConfig() nemesis.Config {
	cfg := r.cfg
	ncfg := nemesis.Config{Kinds: cfg.nemeses, Rand: rand.New(rand.NewSource(cfg.seed)),
		Interval: cfg.interval, FaultDuration: cfg.faultDuration, ClientPause: r.pauses.Pause,
		SessionTTL: cfg.ttl, HoldTTL: cfg.holdTTL,
		LoneReplacements: cfg.negative == negLoneReplacement, UngatedUpgrade: cfg.negative == negUngatedUpgrade}
	if cfg.negative == negWallClock || cfg.negative == negLoneReplacement || cfg.negative == negNoFsync {
		ncfg.Aim = cfg.negative // the nemesis aims at the control's condition (nemesis/aim.go)
	}
	if cfg.verbose {
		ncfg.Logf = r.logf
	}
	return ncfg
}

// mainPhase runs the workload under faults until ctx ends; it returns
// the faults applied by name.
func (r *run) mainPhase(ctx context.Context) map[string]int {
	faults := map[string]int{}
	nemDone := make(chan error, 1)
	if len(r.cfg.nemeses) > 0 {
		go func() {
			var err error
			faults, err = nemesis.Run(ctx, r.cl, r.nemesisConfig(), func(e history.Event) { r.rec.Add(e) })
			nemDone <- err
		}()
	} else {
		nemDone <- nil
	}
	if r.cfg.sampleMetrics > 0 {
		go sampleMetrics(ctx, r.cl, r.rec, r.cfg.sampleMetrics)
	}
	r.clients.Run(ctx)
	if err := <-nemDone; err != nil {
		r.logf("nemesis cleanup: %v", err)
	}
	return faults
}

// finalPhase heals the cluster and has every client acquire its lock,
// then closes the clients, reads the resource and waits for the nodes to
// converge; it returns their last reports.
func (r *run) finalPhase(ctx context.Context) []checker.NodeState {
	hctx, hcancel := context.WithTimeout(ctx, 90*time.Second)
	var err error
	switch r.cfg.negative {
	case negNoConsensus:
		err = up(hctx, r.cl, true)
	case negLoneReplacement:
		// No one cluster to wait for (and compose up would recreate the
		// lone nodes); a node left without a quorum never knows a leader.
		wctx, cancel := context.WithTimeout(hctx, 15*time.Second)
		err = waitEach(wctx, r.cl)
		cancel()
	default:
		err = r.cl.WaitHealthy(hctx)
	}
	hcancel()
	if err != nil {
		r.logf("cluster not healthy after the heal: %v (the liveness check will say)", err)
	}
	r.rec.Add(history.Event{Type: history.Info, Process: history.Harness, F: history.Phase, Fault: "final"})
	r.logf("final phase: every client acquires within %v", r.cfg.liveness)
	r.clients.Final(ctx, r.cfg.liveness)
	r.clients.Close(ctx)
	workload.FinalRead(r.rec, r.res)
	if separateTables(r.cfg.negative) { // they never converge
		return nil
	}
	return converge(ctx, r.cl, 30*time.Second)
}
