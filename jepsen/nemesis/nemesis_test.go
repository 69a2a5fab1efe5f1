package nemesis

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/faultfs"
	"github.com/lockd/lockd/jepsen/history"
)

var n3 = []string{"n1", "n2", "n3"}
var n5 = []string{"n1", "n2", "n3", "n4", "n5"}

func TestRoutePlanIsolate(t *testing.T) {
	got := RoutePlan(IsolateGroups(n3, "n2"))
	want := []Route{{"n1", "n2"}, {"n2", "n1"}, {"n2", "n3"}, {"n3", "n2"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestRoutePlanBridge(t *testing.T) {
	got := RoutePlan([][]string{{"n1", "n2"}, {"n2", "n3"}})
	want := []Route{{"n1", "n3"}, {"n3", "n1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := RoutePlan([][]string{n3}); len(got) != 0 {
		t.Fatalf("one group: %v", got)
	}
}

// cut reports whether a and b cannot talk under groups.
func cut(plan []Route, a, b string) bool {
	ab, ba := false, false
	for _, r := range plan {
		ab = ab || r == Route{a, b}
		ba = ba || r == Route{b, a}
	}
	if ab != ba {
		panic("asymmetric plan")
	}
	return ab
}

func TestShapes(t *testing.T) {
	for seed := int64(0); seed < 50; seed++ {
		r := rand.New(rand.NewSource(seed))
		for _, nodes := range [][]string{n3, n5} {
			mm := MajorityMinority(nodes, r)
			if len(mm) != 2 || len(mm[0]) != len(nodes)/2+1 || len(mm[0])+len(mm[1]) != len(nodes) {
				t.Fatalf("majority/minority %v", mm)
			}
			plan := RoutePlan(mm)
			if len(plan) != 2*len(mm[0])*len(mm[1]) {
				t.Fatalf("plan %v for %v", plan, mm)
			}
			b := Bridge(nodes, r)
			if len(b) != 2 || len(b[0]) != len(nodes)/2+1 || len(b[1]) != len(nodes)/2+1 {
				t.Fatalf("bridge %v", b)
			}
			shared := 0
			for _, x := range b[0] {
				for _, y := range b[1] {
					if x == y {
						shared++
					}
				}
			}
			if shared != 1 {
				t.Fatalf("bridge %v shares %d", b, shared)
			}
			plan = RoutePlan(b)
			if len(plan) != 2*(len(nodes)/2)*(len(nodes)/2) {
				t.Fatalf("bridge plan %v for %v", plan, b)
			}
			all := append(append([]string(nil), b[0]...), b[1]...)
			sort.Strings(all)
			for _, x := range b[0] {
				for _, y := range b[1] {
					if x != y && (x == b[1][0] || y == b[0][len(b[0])-1]) == cut(plan, x, y) {
						t.Fatalf("bridge %v plan %v: %s-%s", b, plan, x, y)
					}
				}
			}
			iso := RandomIsolate(nodes, r)
			if len(iso[0]) != 1 || len(iso[1]) != len(nodes)-1 {
				t.Fatalf("isolate %v", iso)
			}
		}
	}
}

func TestReproducible(t *testing.T) {
	a := MajorityMinority(n5, rand.New(rand.NewSource(7)))
	b := MajorityMinority(n5, rand.New(rand.NewSource(7)))
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different split")
	}
}

func TestParseGroupsAndTargets(t *testing.T) {
	g := ParseGroups([]string{"n1,n2", " n3 ", ""})
	if !reflect.DeepEqual(g, [][]string{{"n1", "n2"}, {"n3"}}) {
		t.Fatal(g)
	}
	if s := GroupsString(g); s != "n1,n2|n3" {
		t.Fatal(s)
	}
}

func TestFaultsOf(t *testing.T) {
	tests := []struct {
		kinds []string
		offer offer
		want  []string
	}{
		{[]string{"kill"}, offer{clientPause: true, nodes: 3}, []string{FaultKill}},
		{nil, offer{nodes: 3}, []string{FaultPartitionNode, FaultPartitionLeader, FaultPartitionMajority, FaultPartitionBridge, FaultKill, FaultPause}},
		{[]string{"mixed", "pause"}, offer{clientPause: true, nodes: 3}, []string{FaultPartitionNode, FaultPartitionLeader, FaultPartitionMajority, FaultPartitionBridge,
			FaultKill, FaultPause, FaultClientPause}},
		{[]string{"clock"}, offer{nodes: 3}, []string{FaultClockBump, FaultClockStrobe}},
		{[]string{"membership"}, offer{nodes: 3}, []string{FaultMemberLeave, FaultMemberRemove, FaultMemberReplace, FaultMemberGrow}},
		{[]string{FaultMemberGrow}, offer{nodes: 5}, nil}, // a 5-node cluster has no spare nodes
		{[]string{"membership"}, offer{nodes: 5}, []string{FaultMemberLeave, FaultMemberRemove, FaultMemberReplace, FaultMemberShrink}},
		{[]string{"disk"}, offer{nodes: 3}, []string{FaultDiskFull, FaultDiskCrash}},
		{[]string{"disk"}, offer{failingDisks: true, nodes: 3}, []string{FaultDiskFull, FaultDiskCrash, FaultDiskFail, FaultDiskFailCrash}},
		{[]string{FaultDiskFailCrash, "kill"}, offer{failingDisks: true, nodes: 3}, []string{FaultDiskFailCrash, FaultKill}},
		{[]string{FaultDiskFail}, offer{nodes: 3}, nil}, // not offered without failing disks
		{[]string{FaultMemberShrink}, offer{nodes: 3}, nil},
		{[]string{"power"}, offer{failingDisks: true, nodes: 3}, []string{FaultPowerLoss, FaultPowerLossMajority, FaultTornWrite, FaultBadRead}},
		{[]string{"power"}, offer{nodes: 3}, nil}, // no mirrors, no power faults
		{[]string{FaultTornWrite}, offer{failingDisks: true, nodes: 5}, []string{FaultTornWrite}},
	}
	uses := []struct {
		names []string
		kind  string
		want  bool
	}{
		{[]string{"disk"}, KindDisk, true},
		{[]string{"kill", FaultDiskFail}, KindDisk, true},
		{[]string{"mixed"}, KindPause, true},
		{[]string{"mixed", FaultClockBump}, KindClock, true},
		{[]string{"kill", "partition"}, KindDisk, false},
		{[]string{"mixed"}, KindClock, false},
		{[]string{FaultPowerLossMajority}, KindPower, true},
		{[]string{"disk"}, KindPower, false},
	}
	if got := untried([]string{"a", "b", "c"}, map[string]bool{"b": true}); !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Errorf("untried = %v", got)
	}
	for _, u := range uses {
		if got := Uses(u.names, u.kind); got != u.want {
			t.Errorf("Uses(%v, %s) = %v", u.names, u.kind, got)
		}
	}
	for _, tt := range tests {
		if got := faultsOf(tt.kinds, tt.offer); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("faultsOf(%v, %+v) = %v, want %v", tt.kinds, tt.offer, got, tt.want)
		}
	}
	if err := ValidKinds([]string{"disk", FaultDiskFailCrash, FaultMemberReplace, FaultMemberGrow, FaultMemberShrink}); err != nil {
		t.Errorf("a fault's name refused as a kind: %v", err)
	}
	if !FailsWrites([]string{FaultBadRead}) || !FailsWrites([]string{KindPower}) || FailsWrites([]string{FaultDiskFull}) {
		t.Error("FailsWrites: a power fault needs the mirrors, disk-full does not")
	}
	if ValidKinds([]string{"bogus"}) == nil {
		t.Fatal("bogus kind accepted")
	}
	if ValidKinds([]string{"clock", "membership"}) != nil {
		t.Fatal("clock and membership refused")
	}
}

func TestNextID(t *testing.T) {
	for id, want := range map[string]string{"n1": "n1-r1", "n1-r1": "n1-r2", "n3-r9": "n3-r10", "a-rx": "a-rx-r1"} {
		if got := nextID(id); got != want {
			t.Errorf("nextID(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestRunDocker brings up a 3-node cluster (project ljunit, subnet
// 10.77.51, ports 1761..1763), runs the mixed schedule for ~25 s and
// checks that the cluster ends healthy. It needs the lockd:dev image and
// LOCKJEPSEN_DOCKER_TEST=1 (LOCKJEPSEN_DOCKER_KINDS picks one kind).
func TestRunDocker(t *testing.T) {
	if os.Getenv("LOCKJEPSEN_DOCKER_TEST") == "" {
		t.Skip("set LOCKJEPSEN_DOCKER_TEST=1 (needs docker and the lockd:dev image)")
	}
	if exec.Command("docker", "info").Run() != nil {
		t.Skip("docker info fails")
	}
	c := &compose.Cluster{Dir: "../..", Project: "ljunit", Nodes: 3, Subnet: "10.77.51", PortPrefix: "176"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	defer c.Down(context.Background())
	if err := c.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var evs []history.Event
	rctx, rcancel := context.WithTimeout(ctx, 25*time.Second)
	defer rcancel()
	kinds := []string{"mixed"}
	if k := os.Getenv("LOCKJEPSEN_DOCKER_KINDS"); k != "" {
		kinds = []string{k}
	}
	counts, err := Run(rctx, c, Config{Kinds: kinds, Rand: rand.New(rand.NewSource(1)),
		Interval: 2 * time.Second, FaultDuration: 4 * time.Second, Logf: t.Logf},
		func(e history.Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counts %v", counts)
	starts, stops := 0, 0
	for _, e := range evs {
		switch e.F {
		case history.Start:
			starts++
		case history.Stop:
			stops++
		}
	}
	if starts == 0 || starts != stops {
		t.Fatalf("%d starts, %d stops", starts, stops)
	}
	hctx, hcancel := context.WithTimeout(ctx, 60*time.Second)
	defer hcancel()
	if err := Healthy(hctx, c); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitConverged(hctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := c.SaveLogs(hctx, dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir + "/n1.log"); err != nil || fi.Size() == 0 {
		t.Fatalf("n1.log: %v", err)
	}
}

// fakeDisk records what a disk fault asks of a disk.
type fakeDisk struct{ failing bool }

func (d *fakeDisk) FailWrites(on bool) { d.failing = on }

// TestDiskFailFailsOneDiskUntilUndone checks disk-fail on fake disks: the
// target's writes fail, nobody else's, and the undo (also Recover's
// safety net) lets them through again; a node without such a disk is
// refused.
func TestDiskFailFailsOneDiskUntilUndone(t *testing.T) {
	n1, n2 := &fakeDisk{}, &fakeDisk{}
	c := &compose.Cluster{Nodes: 3, FailingDisks: map[string]compose.WriteFailer{"n1": n1, "n2": n2}}
	ft, err := breakOne(failing(c, FaultDiskFail), "n1")
	if err != nil || !n1.failing || n2.failing {
		t.Fatalf("after the fault: %v, n1 failing %v, n2 failing %v", err, n1.failing, n2.failing)
	}
	if ft.name != FaultDiskFail || !reflect.DeepEqual(ft.targets, []string{"n1"}) {
		t.Errorf("fault %q on %v", ft.name, ft.targets)
	}
	if err := ft.undo(context.Background()); err != nil || n1.failing {
		t.Fatalf("after the undo: %v, n1 failing %v", err, n1.failing)
	}
	if _, err := breakOne(failing(c, FaultDiskFail), "n3"); err == nil {
		t.Error("a node without a failing disk was faulted")
	}
	if err := checkOffered([]string{FaultDiskFail}, offer{nodes: 3}); err == nil {
		t.Error("disk-fail by name accepted without failing disks")
	}
	if err := checkOffered([]string{KindPower}, offer{nodes: 3}); err == nil {
		t.Error("the power kind accepted without mirrors")
	}
	if err := checkOffered([]string{KindPower, FaultTornWrite}, offer{failingDisks: true, nodes: 3}); err != nil {
		t.Error(err)
	}
	if err := checkOffered([]string{KindDisk, FaultDiskFail}, offer{failingDisks: true, nodes: 3}); err != nil {
		t.Error(err)
	}
}

// powerFake is a disk that records the power faults asked of it.
type powerFake struct {
	fakeDisk
	reads string // "", "fail" or "corrupt"
}

func (d *powerFake) PowerLoss(*rand.Rand) (faultfs.Loss, error) { return faultfs.Loss{}, nil }
func (d *powerFake) FailReads(on bool)                          { d.set(on, "fail") }
func (d *powerFake) CorruptReads(on bool)                       { d.set(on, "corrupt") }
func (d *powerFake) set(on bool, mode string) {
	d.reads = ""
	if on {
		d.reads = mode
	}
}

// TestBadReadUntilUndone: bad-read breaks one node's reads, both ways
// over a few draws, until undone; a node without a mirror is refused.
func TestBadReadUntilUndone(t *testing.T) {
	n1 := &powerFake{}
	c := &compose.Cluster{Nodes: 3, FailingDisks: map[string]compose.WriteFailer{"n1": n1, "n2": &fakeDisk{}}}
	r := rand.New(rand.NewSource(1))
	seen := map[string]bool{}
	for range 20 {
		ft, err := badRead(c, "n1", r)
		if err != nil || n1.reads == "" || ft.name != FaultBadRead {
			t.Fatalf("bad-read: %v, reads %q", err, n1.reads)
		}
		seen[n1.reads] = true
		if err := ft.undo(context.Background()); err != nil || n1.reads != "" {
			t.Fatalf("after the undo: %v, reads %q", err, n1.reads)
		}
	}
	if !seen["fail"] || !seen["corrupt"] {
		t.Errorf("read faults drawn: %v, want both", seen)
	}
	if _, err := badRead(c, "n2", r); err == nil {
		t.Error("bad-read on a disk that cannot fail its reads")
	}
}

// TestMajorityWithLeader: a power-loss-majority's nodes are a majority
// that holds the leader, or leaves it out, as drawn.
func TestMajorityWithLeader(t *testing.T) {
	tests := []struct {
		nodes      []string
		leader     string
		withLeader bool
	}{
		{n3, "n2", true}, {n3, "n2", false}, {n5, "n5", true}, {n5, "n5", false}, {n5, "", true}, {n3, "gone", false},
	}
	r := rand.New(rand.NewSource(7))
	for _, tt := range tests {
		for range 10 {
			got := majorityWithLeader(tt.nodes, tt.leader, tt.withLeader, r)
			in := false
			seen := map[string]bool{}
			for _, n := range got {
				in = in || n == tt.leader
				seen[n] = true
			}
			if len(got) != len(tt.nodes)/2+1 || len(seen) != len(got) {
				t.Fatalf("%v: %v is not a majority of distinct nodes", tt, got)
			}
			if tt.leader != "" && tt.leader != "gone" && in != tt.withLeader {
				t.Fatalf("%v: %v, leader in it %v", tt, got, in)
			}
		}
	}
}

// TestFaultThatAppliedNothingIsRecorded: a fault drawn that failed before
// it applied anything is recorded as unapplied, with why, and opens no
// window; one that applied is recorded as started.
func TestFaultThatAppliedNothingIsRecorded(t *testing.T) {
	var events []history.Event
	fail := true
	pause := func(context.Context, time.Duration) (string, error) {
		if fail {
			return "", errors.New("no client holds a lock")
		}
		return "p1", nil
	}
	s := newSchedule(&compose.Cluster{Nodes: 3}, Config{ClientPause: pause, SessionTTL: time.Second,
		Rand: rand.New(rand.NewSource(1))}, func(e history.Event) { events = append(events, e) })
	if ft, _ := s.inject(context.Background(), []string{FaultClientPause}, map[string]bool{}); ft != nil {
		t.Fatalf("a failed client pause was applied: %+v", ft)
	}
	fail = false
	if ft, _ := s.inject(context.Background(), []string{FaultClientPause}, map[string]bool{}); ft == nil {
		t.Fatal("a client pause was not applied")
	}
	want := []history.Event{
		{Process: history.Nemesis, Type: history.Info, F: history.Unapplied, Fault: FaultClientPause, Error: "no client holds a lock"},
		{Process: history.Nemesis, Type: history.Info, F: history.Start, Fault: FaultClientPause, Targets: []string{"p1"}},
	}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("recorded %+v, want %+v", events, want)
	}
}
