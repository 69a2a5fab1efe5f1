package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/nemesis"
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
	// negNoFsync is lockd --unsafe no-fsync: raft.db is fsynced only at
	// every 64th log write, so the power nemesis's power-loss-majority
	// takes acknowledged entries back (run it with --nemesis power, or
	// power-loss-majority by name).
	negNoFsync = "no-fsync"
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
	// negHoldPastTTL is lockd --unsafe no-hold-ttl: the leader drops every
	// acquire's hold TTL, so a holder that overstays its grant (the
	// workloads' overstays, with --hold-ttl) is seen still holding it.
	negHoldPastTTL = "hold-past-ttl"
	// negStaleProclaim is lockd --unsafe stale-proclaim: the leader gives
	// every proclaim to whoever leads the name, so a deposed leader's
	// value shows under its successor's token (run it with --workload
	// election and --hold-ttl, whose overstaying leaders are deposed
	// without knowing it).
	negStaleProclaim = "stale-proclaim"
)

// negatives lists the negative controls.
var negatives = []string{negUnfenced, negNoConsensus, negIntruderAdmin, negWallClock, negLoneReplacement, negLyingDisk,
	negUngatedUpgrade, negStaleSnapshot, negNoFsync, negHoldPastTTL, negStaleProclaim}

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
	raftLog                         string // the nodes' --raft-log ("": lockd's default)
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
		`" (an upgrade without the version gate), "`+negStaleSnapshot+
		`" (every snapshot holds the state of the one before), "`+negNoFsync+
		`" (lockd acknowledges log writes it fsyncs only now and then), "`+negHoldPastTTL+
		`" (lockd ignores hold TTLs) or "`+negStaleProclaim+
		`" (lockd gives a deposed leader's proclaim to the leader); the run must be flagged invalid`)
	fs.StringVar(&c.raftLog, "raft-log", "", `the nodes' --raft-log: "wal" or "bolt" (default: lockd's, wal; bolt under --negative no-fsync)`)
	fs.StringVar(&c.out, "out", "", "results directory (default: <repo>/jepsen/results)")
	fs.StringVar(&c.dir, "dir", "", "repository root holding docker-compose.yml (default: found from the working directory)")
	fs.StringVar(&c.project, "project", "lockd-jepsen", "docker compose project name")
	fs.StringVar(&c.subnet, "subnet", "10.77.40", "first three octets of the cluster network")
	fs.StringVar(&c.ports, "port-prefix", "174", "host ports of the nodes' HTTP APIs: 127.0.0.1:<prefix>k for node k")
	fs.BoolVar(&c.build, "build", true, "build the suite's lockd (bin/faults/lockd) and its image, "+compose.DefaultImage+", first (make jepsen-image)")
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
	if c.negative == negNoFsync && !slices.Contains(c.nemeses, nemesis.KindPower) &&
		!slices.Contains(c.nemeses, nemesis.FaultPowerLossMajority) {
		return fmt.Errorf("--negative %s needs a majority's power loss: --nemesis %s or %s", negNoFsync,
			nemesis.KindPower, nemesis.FaultPowerLossMajority)
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
	if c.negative == negHoldPastTTL && c.holdTTL <= 0 {
		return fmt.Errorf("--negative %s needs --hold-ttl: only holds with a TTL can be kept past it", negHoldPastTTL)
	}
	if c.negative == negStaleProclaim && (c.workload != "election" || c.holdTTL <= 0) {
		return fmt.Errorf("--negative %s needs --workload election and --hold-ttl: its leaders are deposed by their hold TTL", negStaleProclaim)
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
	case negNoFsync:
		env = append(env, "LOCKD_UNSAFE=no-fsync")
	case negHoldPastTTL:
		env = append(env, "LOCKD_UNSAFE=no-hold-ttl")
	case negStaleProclaim:
		env = append(env, "LOCKD_UNSAFE=stale-proclaim")
	}
	if raftLog := cfg.raftLog; raftLog != "" || cfg.negative == negNoFsync {
		if cfg.negative == negNoFsync {
			raftLog = "bolt" // the no-fsync store is bolt's
		}
		env = append(env, "LOCKD_RAFT_LOG="+raftLog)
	}
	if cfg.withoutACL() {
		env = append(env, "LOCKD_ACL=0")
	}
	return env
}
