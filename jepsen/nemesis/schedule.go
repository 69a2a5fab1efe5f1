package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/history"
)

// Fault names (history Event.Fault of nemesis events).
const (
	FaultPartitionNode     = "partition-node"
	FaultPartitionLeader   = "partition-leader"
	FaultPartitionMajority = "partition-majority"
	FaultPartitionBridge   = "partition-bridge"
	FaultKill              = "kill"
	FaultPause             = "pause"
	FaultClientPause       = "client-pause"
	FaultClockBump         = "clock-bump"
	FaultClockStrobe       = "clock-strobe"
)

// Kinds of Config.Kinds.
const (
	KindPartition = "partition"
	KindKill      = "kill"
	KindPause     = "pause"
	KindClock     = "clock"
	KindMixed     = "mixed"
)

// ClientPauseFunc makes the harness stop one client (its keepalives and
// operations) for d. It must start the pause and return promptly with a
// description of its target (e.g. the process or session); the pause
// ends by itself after d.
type ClientPauseFunc func(ctx context.Context, d time.Duration) (target string, err error)

// Config configures Run.
type Config struct {
	// Kinds are the fault kinds to draw from: "partition", "kill",
	// "pause", "clock", "membership", "disk", "power", "upgrade", "mixed"
	// (partition, kill and pause). Empty: mixed. Clock faults need the
	// nodes' clock hook (clock.go), disk faults data dirs of their own
	// (disk.go), upgrades nodes started on an older image (upgrade.go).
	Kinds []string
	// Rand drives every choice; nil: seeded from the clock.
	Rand *rand.Rand
	// Interval is the maximum quiet time between faults; each one is
	// uniform in [Interval/2, Interval]. 0: 10 s.
	Interval time.Duration
	// FaultDuration is the maximum duration of a fault; each one is
	// uniform in [FaultDuration/3, FaultDuration]. 0: 15 s.
	FaultDuration time.Duration
	// ClientPause, if set with SessionTTL, enables "client-pause" faults
	// (kind pause): a client is paused for longer than SessionTTL (TTL +
	// 1 s .. 2×TTL), so its session expires on the server.
	ClientPause ClientPauseFunc
	// SessionTTL is the clients' session TTL.
	SessionTTL time.Duration
	// LoneReplacements makes every membership fault bring its nodes back
	// as fresh nodes that bootstrap a cluster of their own (the
	// membership nemesis's negative control; see membership.go).
	LoneReplacements bool
	// UngatedUpgrade is the upgrade nemesis's negative control (see
	// upgrade.go): the version gate off on upgraded nodes, the leader
	// upgraded second, the last node left on the old build.
	UngatedUpgrade bool
	// Aim, if set, replaces the random schedule by attempts aimed at one
	// negative control's condition (AimWallClock, AimLoneReplacement; see
	// aim.go), each recorded as Exercised or Missed.
	Aim string
	// HoldTTL is the clients' hold TTL (AimWallClock steps past it).
	HoldTTL time.Duration
	// Logf, if set, receives a line per fault and per error.
	Logf func(format string, args ...any)
}

type fault struct {
	name    string
	targets []string
	undo    func(ctx context.Context) error
	until   time.Time // client pause: when it ends by itself
}

// offer is what a run can inject beyond its kinds' plain faults.
type offer struct {
	clientPause  bool // client-pause: Config.ClientPause and SessionTTL set
	failingDisks bool // disk-fail and disk-fail-crash: the cluster has FailingDisks
	nodes        int  // the cluster's size
}

// offerOf is what cfg and c offer.
func offerOf(c *compose.Cluster, cfg Config) offer {
	return offer{clientPause: cfg.ClientPause != nil && cfg.SessionTTL > 0,
		failingDisks: len(c.FailingDisks) > 0, nodes: len(c.Names())}
}

// faultsOf lists the faults of kinds, kind by kind (faultsByKind).
func faultsOf(kinds []string, o offer) []string {
	var out []string
	for _, g := range faultsByKind(kinds, o) {
		out = append(out, g...)
	}
	return out
}

// faultsByKind returns the faults of each kind asked for, in order,
// mixed expanded and each kind once.
func faultsByKind(kinds []string, o offer) [][]string {
	of := func(k string) []string {
		switch k {
		case KindPartition:
			return []string{FaultPartitionNode, FaultPartitionLeader, FaultPartitionMajority, FaultPartitionBridge}
		case KindKill:
			return []string{FaultKill}
		case KindPause:
			if o.clientPause {
				return []string{FaultPause, FaultClientPause}
			}
			return []string{FaultPause}
		case KindClock:
			return []string{FaultClockBump, FaultClockStrobe}
		case KindMembership:
			return memberFaults(o.nodes)
		case KindDisk:
			return diskFaults(o.failingDisks)
		case KindPower:
			return powerFaults(o.failingDisks)
		case KindUpgrade:
			return []string{FaultUpgrade}
		}
		if kind := KindOf(k); kind != "" && slices.Contains(faultsOf([]string{kind}, o), k) {
			return []string{k} // one fault by name, where offered
		}
		return nil
	}
	if len(kinds) == 0 {
		kinds = []string{KindMixed}
	}
	var out [][]string
	seen := map[string]bool{}
	for _, k := range kinds {
		expanded := []string{k}
		if k == KindMixed {
			expanded = []string{KindPartition, KindKill, KindPause}
		}
		for _, k2 := range expanded {
			if !seen[k2] {
				seen[k2] = true
				if faults := of(k2); len(faults) > 0 {
					out = append(out, faults)
				}
			}
		}
	}
	return out
}

// allKinds are the fault kinds a run may name, mixed aside.
var allKinds = []string{KindPartition, KindKill, KindPause, KindClock, KindMembership, KindDisk, KindPower, KindUpgrade}

// KindOf returns the kind a fault name belongs to, or "" for none.
func KindOf(fault string) string {
	for _, nodes := range []int{3, 5} { // membership faults differ by size
		everything := offer{clientPause: true, failingDisks: true, nodes: nodes}
		for _, k := range allKinds {
			if slices.Contains(faultsOf([]string{k}, everything), fault) {
				return k
			}
		}
	}
	return ""
}

// Uses reports whether a run given kinds (kinds or fault names) may draw
// faults of kind, and so needs what they need.
func Uses(kinds []string, kind string) bool {
	for _, k := range kinds {
		if k == kind || KindOf(k) == kind ||
			k == KindMixed && (kind == KindPartition || kind == KindKill || kind == KindPause) {
			return true
		}
	}
	return false
}

// CheckOffered refuses a fault named on its own (not through its kind)
// that a run could never draw — it would inject nothing and still be
// judged: the EIO disk faults and the power kind without failing disks
// (a run with --keep mounts none), member-shrink on 3 nodes.
func CheckOffered(names []string, nodes int, failingDisks bool) error {
	o := offer{clientPause: true, failingDisks: failingDisks, nodes: nodes}
	return checkOffered(names, o)
}

func checkOffered(names []string, o offer) error {
	for _, k := range names {
		if k == KindPower && !o.failingDisks { // a kind with nothing to draw
			return fmt.Errorf("nemesis: kind %q needs the faultfs mirrors (not with --keep)", k)
		}
		if slices.Contains(allKinds, k) || k == KindMixed || KindOf(k) == "" {
			continue
		}
		if !slices.Contains(faultsOf([]string{k}, o), k) {
			return fmt.Errorf("nemesis: fault %q cannot be drawn in this run (%d nodes, failing disks %v)", k, o.nodes, o.failingDisks)
		}
	}
	return nil
}

// FailsWrites reports whether a run given names may draw a fault that
// fails a disk's writes, loses its power or fails its reads, and so
// needs compose.Cluster.FailingDisks (faultfs mirrors).
func FailsWrites(names []string) bool {
	return slices.Contains(names, KindDisk) || slices.Contains(names, FaultDiskFail) ||
		slices.Contains(names, FaultDiskFailCrash) || Uses(names, KindPower)
}

// ValidKinds checks kind names; a fault's own name (e.g. "disk-fail")
// stands for that fault alone.
func ValidKinds(names []string) error {
	for _, k := range names {
		if !slices.Contains(allKinds, k) && k != KindMixed && KindOf(k) == "" {
			return fmt.Errorf("unknown nemesis kind %q (partition, kill, pause, clock, membership, disk, power, upgrade, mixed, or one fault's name)", k)
		}
	}
	return nil
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int63n(int64(hi-lo)))
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Run injects random faults until ctx ends: quiet for an interval, apply
// a fault, keep it for its duration, undo it, and so on. The first faults
// are one of each kind asked for, in a random order, then each fault not
// yet tried. Every fault is
// recorded with rec as an info event F "start" and then "stop" (Fault:
// one of the Fault* names; Targets: the nodes, or for partitions one
// comma-joined entry per group; the start's Error if it applied in part
// at most), or F "unapplied" if it failed before it applied anything.
// When ctx ends it always leaves the
// cluster healed — with a fresh context it undoes the current fault,
// then Recover (heal routes, unpause, start stopped nodes) — records the
// pending stop, and returns the number of faults applied by name. The
// error is the cleanup's, if any; failures to apply a fault are logged
// and counted under "error".
func Run(ctx context.Context, c *compose.Cluster, cfg Config, rec func(history.Event)) (map[string]int, error) {
	if err := ValidKinds(cfg.Kinds); err != nil {
		return nil, err
	}
	if err := checkOffered(cfg.Kinds, offerOf(c, cfg)); err != nil {
		return nil, err
	}
	s := newSchedule(c, cfg, rec)
	if cfg.Aim != "" {
		return s.aim(ctx), s.cleanUp(nil)
	}
	kinds := faultsByKind(cfg.Kinds, offerOf(c, cfg))
	if len(kinds) == 0 {
		<-ctx.Done()
		return s.counts, nil
	}
	// Each kind once first, in a random order (a run long enough for
	// len(kinds) faults has every kind), then each fault not yet tried, in
	// a random order (one long enough for those has every fault), then
	// any fault.
	first := s.r.Perm(len(kinds))
	tried := map[string]bool{}
	var cur *fault
	for n := 0; sleep(ctx, between(s.r, s.cfg.Interval/2, s.cfg.Interval)); n++ {
		choices := faultsOf(cfg.Kinds, offerOf(c, cfg))
		if n < len(first) {
			choices = kinds[first[n]]
		} else if rest := untried(choices, tried); len(rest) > 0 {
			choices = rest
		}
		ft, d := s.inject(ctx, choices, tried)
		if ft == nil {
			continue
		}
		cur = ft
		if !sleep(ctx, d) {
			break
		}
		s.lift(ft)
		cur = nil
	}
	return s.counts, s.cleanUp(cur)
}

// untried returns the faults of choices not in tried, in their order.
func untried(choices []string, tried map[string]bool) []string {
	var out []string
	for _, f := range choices {
		if !tried[f] {
			out = append(out, f)
		}
	}
	return out
}

// schedule is a Run under way.
type schedule struct {
	c      *compose.Cluster
	cfg    Config
	r      *rand.Rand
	logf   func(format string, args ...any)
	rec    func(history.Event)
	counts map[string]int // faults applied by name, and "error"
}

// newSchedule fills in cfg's defaults.
func newSchedule(c *compose.Cluster, cfg Config, rec func(history.Event)) *schedule {
	s := &schedule{c: c, cfg: cfg, r: cfg.Rand, logf: cfg.Logf, rec: rec, counts: map[string]int{}}
	if s.r == nil {
		s.r = rand.New(rand.NewSource(time.Now().UnixNano()))
	}
	if s.cfg.Interval <= 0 {
		s.cfg.Interval = 10 * time.Second
	}
	if s.cfg.FaultDuration <= 0 {
		s.cfg.FaultDuration = 15 * time.Second
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	if s.rec == nil {
		s.rec = func(history.Event) {}
	}
	return s
}

func (s *schedule) record(f string, ft *fault) {
	s.rec(history.Event{Process: history.Nemesis, Type: history.Info, F: f,
		Fault: ft.name, Targets: ft.targets})
}

// inject applies a random one of choices (noting it in tried) and
// records its start; it returns the fault (nil if nothing was applied)
// and how long to keep it.
func (s *schedule) inject(ctx context.Context, choices []string, tried map[string]bool) (*fault, time.Duration) {
	name := choices[s.r.Intn(len(choices))]
	tried[name] = true
	d := between(s.r, s.cfg.FaultDuration/3, s.cfg.FaultDuration)
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	began := time.Now()
	ft, err := apply(actx, s.c, s.cfg, s.r, name, d)
	cancel()
	if errors.Is(err, errNothingToDo) {
		return nil, d
	}
	if err != nil {
		s.counts["error"]++
		s.logf("nemesis: %s: %v", name, err)
		if ft == nil {
			s.rec(history.Event{Process: history.Nemesis, Type: history.Info, F: history.Unapplied, Fault: name, Error: err.Error()})
			return nil, d
		}
	}
	s.counts[ft.name]++
	start := history.Event{Process: history.Nemesis, Type: history.Info, F: history.Start,
		Fault: ft.name, Targets: ft.targets, Error: errorText(err)}
	if ft.name == FaultPowerLossMajority {
		// Applied in full before it is recorded: power off, back on, a
		// leader among the majority. Its window opens when power went
		// off. Other faults take effect about when they are recorded: a
		// lead there would only widen the window the checkers excuse.
		start.Lead = time.Since(began)
	}
	s.rec(start)
	s.logf("nemesis: start %s %v for %v", ft.name, ft.targets, d)
	return ft, d
}

// errorText is err's text, "" for nil: a fault whose start carries one
// was applied only in part (report.Summarize counts it apart).
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// lift undoes ft and records its stop.
func (s *schedule) lift(ft *fault) {
	uctx, cancel := context.WithTimeout(context.Background(), RestartTimeout+30*time.Second)
	err := undo(uctx, ft)
	cancel()
	if err != nil {
		s.counts["error"]++
		s.logf("nemesis: undo %s: %v", ft.name, err)
	}
	s.record(history.Stop, ft)
	s.logf("nemesis: stop %s %v", ft.name, ft.targets)
}

// cleanUp leaves the cluster healed after the run's ctx ended, with a
// fresh context: it undoes cur (if any) and records its stop, then
// Recover. It returns the first error.
func (s *schedule) cleanUp(cur *fault) error {
	cctx, cancel := context.WithTimeout(context.Background(), RestartTimeout+60*time.Second)
	defer cancel()
	var firstErr error
	if cur != nil {
		if err := undo(cctx, cur); err != nil {
			firstErr = err
		}
		s.record(history.Stop, cur)
		s.logf("nemesis: stop %s %v (final)", cur.name, cur.targets)
	}
	if err := Recover(cctx, s.c); err != nil && firstErr == nil {
		firstErr = err
	}
	return firstErr
}

func undo(ctx context.Context, ft *fault) error {
	var err error
	if ft.undo != nil {
		err = ft.undo(ctx)
	}
	if !ft.until.IsZero() { // a client pause ends by itself: wait for it
		if d := time.Until(ft.until); d > 0 {
			sleep(ctx, d)
		}
	}
	return err
}

// currentLeader asks c for its leader up to three times: under load one
// round of status reads can time out, and a fault meant for the leader
// would go to a random node instead.
func currentLeader(ctx context.Context, c *compose.Cluster) string {
	for range 3 {
		if l, _ := c.Leader(ctx); l != "" {
			return l
		}
		if !sleep(ctx, 500*time.Millisecond) {
			break
		}
	}
	return ""
}

// apply applies one fault. It returns a nil fault when nothing was
// applied; a non-nil fault with an error when something may have been
// (so that it gets undone).
func apply(ctx context.Context, c *compose.Cluster, cfg Config, r *rand.Rand, name string, d time.Duration) (*fault, error) {
	switch name {
	case FaultPartitionNode, FaultPartitionLeader, FaultPartitionMajority, FaultPartitionBridge:
		return applyPartition(ctx, c, r, name)
	case FaultKill:
		n := ""
		if cfg.LoneReplacements {
			// The control: the cluster's leader dies, so that its clients
			// fail over, some onto a lone replacement.
			n = currentLeader(ctx, c)
		}
		if n == "" {
			n = pickNode(ctx, c, r, true)
		}
		ft := &fault{name: name, targets: []string{n},
			undo: func(ctx context.Context) error { return Restart(ctx, c, n) }}
		return ft, Kill(ctx, c, n)
	case FaultPause:
		n := pickNode(ctx, c, r, true)
		ft := &fault{name: name, targets: []string{n},
			undo: func(ctx context.Context) error { return Resume(ctx, c, n) }}
		return ft, Pause(ctx, c, n)
	case FaultClientPause:
		pd := max(between(r, cfg.SessionTTL+time.Second, 2*cfg.SessionTTL), d)
		target, err := cfg.ClientPause(ctx, pd)
		if err != nil {
			return nil, err
		}
		return &fault{name: name, targets: []string{target}, until: time.Now().Add(pd)}, nil
	case FaultClockBump:
		return clockBump(ctx, c, clockTarget(ctx, c, r), r)
	case FaultClockStrobe:
		return clockStrobe(ctx, c, clockTarget(ctx, c, r), r)
	case FaultUpgrade:
		return upgradeNext(ctx, c, cfg)
	}
	if ft, ok, err := applyDisk(ctx, c, cfg, r, name); ok {
		return ft, err
	}
	if isMembership(name) {
		return applyMembership(ctx, c, cfg, r, name)
	}
	return nil, fmt.Errorf("unknown fault %q", name)
}

// pickNode is a random node, or the leader half the time with leaderToo.
func pickNode(ctx context.Context, c *compose.Cluster, r *rand.Rand, leaderToo bool) string {
	nodes := c.Names()
	if leaderToo && r.Intn(2) == 0 {
		if l := currentLeader(ctx, c); l != "" {
			return l
		}
	}
	return nodes[r.Intn(len(nodes))]
}

// applyPartition installs one partition fault; healing undoes it.
func applyPartition(ctx context.Context, c *compose.Cluster, r *rand.Rand, name string) (*fault, error) {
	nodes := c.Names()
	var groups [][]string
	switch name {
	case FaultPartitionLeader:
		if l, _ := c.Leader(ctx); l != "" {
			groups = IsolateGroups(nodes, l)
		} else {
			name, groups = FaultPartitionNode, RandomIsolate(nodes, r)
		}
	case FaultPartitionMajority:
		groups = MajorityMinority(nodes, r)
	case FaultPartitionBridge:
		groups = Bridge(nodes, r)
	default:
		groups = RandomIsolate(nodes, r)
	}
	ft := &fault{name: name, targets: Targets(groups), undo: func(ctx context.Context) error { return Heal(ctx, c) }}
	return ft, Partition(ctx, c, groups)
}

// applyDisk applies a disk or power fault; ok is false for any other.
func applyDisk(ctx context.Context, c *compose.Cluster, cfg Config, r *rand.Rand, name string) (ft *fault, ok bool, err error) {
	switch name {
	case FaultDiskFull:
		ft, err = breakOne(filling(c, name), pickNode(ctx, c, r, true))
	case FaultDiskFail:
		ft, err = breakOne(failing(c, name), pickNode(ctx, c, r, true))
	case FaultDiskCrash:
		ft, err = breakMajority(ctx, c, r, filling(c, name))
	case FaultDiskFailCrash:
		ft, err = breakMajority(ctx, c, r, failing(c, name))
	case FaultPowerLoss:
		ft, err = powerLossOne(ctx, c, cfg, name, pickNode(ctx, c, r, true), nil)
	case FaultTornWrite:
		ft, err = powerLossOne(ctx, c, cfg, name, pickNode(ctx, c, r, true), r)
	case FaultPowerLossMajority:
		ft, err = powerLossMajority(ctx, c, cfg, r)
	case FaultBadRead:
		ft, err = badRead(c, pickNode(ctx, c, r, true), r)
	default:
		return nil, false, nil
	}
	return ft, true, err
}
