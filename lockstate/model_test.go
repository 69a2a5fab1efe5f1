package lockstate

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/quorum"
)

// The model-based random test. A harness drives three tables with the same
// random log: the engine under test (a), a twin engine (b) that replays
// every entry (a Tick instead of every entry a refuses) and is now and then
// replaced by a copy of a rebuilt from its Export, and the reference model
// (refmodel_test.go). After every entry it checks
//
//   - the invariants of invariants_test.go, read from a's public views
//     (Locks, Lock, Sessions, Session, Request, Export, WaitGraph, Check,
//     NextDeadline, Version, Stats) and from the Result, and re-derived
//     there from the rules without the engine's helpers;
//   - that the twin gave the same Result (determinism, snapshot round
//     trips) and, for an entry a refused, that a's Digest and Export equal
//     the twin's after a Tick: a failed command changes nothing;
//   - that the model predicted the same error code, request, events (in
//     order) and the same whole state.
//
// The checks are named: holders, semaphore-weight, grantable-waiter,
// fairness, token, version, version-spurious, version-decrease, waitgraph,
// deadlock-cycle, deadline, views, result, err-digest, stale-index, twin,
// snapshot and model.
//
// After a violation the seed goes on (the model or the twin is rebuilt
// from a's Export if it disagreed), so one run reports every check that
// fails, with the first violation of each check per seed. The test fails at
// the end, printing per check the number of failing seeds and the first
// reports, each with its seed and the tail of the operation trace.
//
// Useful flags (go test -run TestModelRandom ./lockstate -args ...):
//
//	-model.seed=N        run only seed N
//	-model.shrink        print, per failing seed and check, a shrunk log
//	-model.tolerate=c,…  count, but do not fail, the named checks

var (
	flagSeed   = flag.Uint64("model.seed", 0, "TestModelRandom: run only this seed")
	flagSeeds  = flag.Int("model.seeds", 0, "TestModelRandom: number of seeds (0: default)")
	flagOps    = flag.Int("model.ops", 0, "TestModelRandom: operations per seed (0: default)")
	flagShrink = flag.Bool("model.shrink", false, "TestModelRandom: shrink each failing seed's log and print the shortest one found")
	flagTol    = flag.String("model.tolerate", "", "TestModelRandom, FuzzOps: comma-separated checks to count but not fail on")
)

// tolerated reports whether -model.tolerate names check.
func tolerated(check string) bool {
	return *flagTol != "" && slices.Contains(strings.Split(*flagTol, ","), check)
}

// modelNames is the name universe: small and hierarchical so that conflicts
// are frequent; "b" and "c" are usually semaphores.
var modelNames = []string{"a", "a/b", "a/b/c", "a/c", "b", "b/x", "c"}

var modelLimit = map[string]int{"b": 3, "c": 2}

const (
	traceLen     = 30 // operations shown before a failure
	reportsShown = 2  // failing seeds shown per check
)

func TestModelRandom(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // the checks allocate a lot; fewer GCs save a third of the time
	seeds, ops := 250, 400
	if testing.Short() {
		seeds = 25
	}
	if *flagSeeds > 0 {
		seeds = *flagSeeds
	}
	if *flagOps > 0 {
		ops = *flagOps
	}
	first := uint64(1)
	if *flagSeed != 0 {
		first, seeds = *flagSeed, 1
	}
	// Seeds run in parallel shards (the race detector makes this test
	// long; its checks are single-goroutine, but the machine has more
	// than one core); the results are gathered by seed, so the reports
	// read the same whatever the shards' timing.
	results := make([]seedResult, seeds)
	t.Run("seeds", func(t *testing.T) {
		const shards = 4
		for shard := range shards {
			t.Run(fmt.Sprint(shard), func(t *testing.T) {
				t.Parallel()
				for i := shard; i < seeds; i += shards {
					results[i] = runSeed(t, first+uint64(i), ops)
				}
			})
		}
	})
	total := 0
	reports := map[string][]string{} // by check, the first few reports
	nfail := map[string]int{}        // by check, the number of failing seeds
	tol := map[string]int{}
	for _, r := range results {
		total += r.ops
		for c, n := range r.tolerated {
			tol[c] += n
		}
		for _, f := range r.failures {
			nfail[f.check]++
			if len(reports[f.check]) < reportsShown {
				reports[f.check] = append(reports[f.check], f.report)
			}
		}
	}
	t.Logf("%d seeds, %d operations", seeds, total)
	if len(tol) > 0 {
		t.Logf("tolerated violations: %v", tol)
	}
	checks := make([]string, 0, len(reports))
	for c := range reports {
		checks = append(checks, c)
	}
	slices.Sort(checks)
	for _, c := range checks {
		t.Errorf("check %q failed in %d of %d seeds (rerun one with -model.seed=N -model.shrink); the first:\n%s",
			c, nfail[c], seeds, strings.Join(reports[c], "\n"))
	}
}

// seedResult is what one seed of TestModelRandom found.
type seedResult struct {
	ops       int
	tolerated map[string]int
	failures  []*failure
}

// runSeed runs the model test's random operations for one seed.
func runSeed(t *testing.T, seed uint64, ops int) seedResult {
	n := ops
	if seed%50 == 0 {
		n = 5 * ops // a few long runs with few sessions, so that done-request rings fill up
	}
	h := newHarness(fmt.Sprintf("seed %d", seed))
	h.calm = seed%50 == 0
	rng := rand.New(rand.NewPCG(seed, 0x10c3d))
	for range n {
		h.step(h.genOp(rng))
	}
	if *flagShrink {
		for _, f := range h.failures {
			t.Logf("%s fails %q; shrunk log:\n%s", h.label, f.check, fmtLog(shrinkLog(h.log[:f.op], f.check), f.check))
		}
	}
	return seedResult{ops: h.ops, tolerated: h.tolerated, failures: h.failures}
}

// FuzzOps reads an operation sequence from the fuzz input and runs it
// through the same harness and checks.
func FuzzOps(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("lockd: a model-based fuzz seed"))
	f.Add(bytes.Repeat([]byte{0, 3, 40, 1, 2, 200, 7, 9, 31, 77, 150, 5}, 30))
	r := rand.New(rand.NewPCG(7, 7))
	for range 4 {
		b := make([]byte, 600)
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newHarness("fuzz input")
		c := &byteChooser{data: data}
		for !c.exhausted() && h.ops < 500 {
			h.step(h.genOp(c))
		}
		for _, f := range h.failures {
			t.Error(f.report)
		}
	})
}

// ---- choosing operations ---------------------------------------------------

// chooser is the source of choices: *rand.Rand, or fuzz bytes.
type chooser interface{ IntN(n int) int }

type byteChooser struct {
	data []byte
	pos  int
}

func (c *byteChooser) IntN(n int) int {
	if c.pos >= len(c.data) {
		c.pos++
		return 0
	}
	v := int(c.data[c.pos])
	c.pos++
	return v % n
}

func (c *byteChooser) exhausted() bool { return c.pos >= len(c.data) }

// op is one generated log entry.
type op struct {
	cmd Command
	dt  time.Duration // clock move before the entry (may go back: Now is a leader's stamp)
	gap uint64        // index step; 0 re-uses the last index (must be refused)
}

func pick[T any](c chooser, xs []T) T { return xs[c.IntN(len(xs))] }

func secs(c chooser, n int) time.Duration {
	return time.Duration(c.IntN(n))*time.Second + time.Duration(c.IntN(10))*100*time.Millisecond
}

func (h *harness) genOp(c chooser) op {
	o := op{gap: 1}
	if c.IntN(12) == 0 {
		o.gap = 2 + uint64(c.IntN(2)) // Raft entries the FSM does not see
	}
	switch c.IntN(10) {
	case 0, 1, 2, 3, 4:
	case 5, 6:
		o.dt = time.Duration(c.IntN(5)) * 100 * time.Millisecond
	case 7, 8:
		o.dt = secs(c, 3)
	case 9:
		o.dt = -time.Duration(c.IntN(20)) * 100 * time.Millisecond
	}
	live := h.live()
	w := c.IntN(100)
	if h.calm && ((w >= 8 && w < 14) || (w < 8 && len(live) >= 2)) {
		w = 14 + c.IntN(40) // few, long-lived sessions: acquire instead
	}
	if (w >= 54 && w < 75 && !h.anyHeld()) || (w >= 75 && w < 81 && !h.anyPending()) {
		w = 14 + c.IntN(40) // nothing to release, surrender or cancel: acquire
	}
	switch {
	case len(live) == 0 || (w < 8 && len(live) < 7):
		o.cmd = h.genSession(c)
	case w < 10:
		o.cmd = &CloseSession{Session: h.someSession(c)}
	case w < 12:
		o.cmd = &ExpireSession{Session: h.someSession(c)}
	case w < 14:
		o.cmd = h.genExpireSessions(c)
	case w < 54:
		o.cmd = h.genAcquire(c)
	case w < 66:
		s := h.someHolder(c)
		o.cmd = &Release{Session: s, Name: h.someHeld(c, s)}
	case w < 71:
		s := h.someHolder(c)
		o.cmd = &Release{Session: s, RequestID: h.someRequest(c, s, Granted)}
	case w < 75:
		s := h.someHolder(c)
		o.cmd = &Surrender{Session: s, Name: h.someHeld(c, s)}
	case w < 81:
		o.cmd = h.genCancel(c)
	case w < 85:
		o.cmd = h.genProclaim(c)
	case w < 96:
		o.cmd = &Tick{}
		o.dt += secs(c, 8)
	case w < 97:
		o.cmd, o.gap = &Tick{}, 0
	case w < 98:
		o.cmd = nil
	default:
		o.cmd = h.genRetry(c)
	}
	return o
}

func (h *harness) live() []SessionID {
	ids := make([]SessionID, 0, len(h.prev.sessions))
	for _, s := range h.prev.sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

// someSession is usually a live session, now and then a gone one.
func (h *harness) someSession(c chooser) SessionID {
	live := h.live()
	if len(live) == 0 || c.IntN(30) == 0 {
		if len(h.gone) > 0 && c.IntN(2) == 0 {
			return pick(c, h.gone)
		}
		return pick(c, []SessionID{424242, 424242, 0}) // 0: invalid content, whatever else is wrong
	}
	return pick(c, live)
}

// genExpireSessions expires one to four sessions in one entry (a
// leader's batched expiry): mostly live ones, now and then one that is
// gone, and rarely a batch whose content is invalid (a session named
// twice, or none).
func (h *harness) genExpireSessions(c chooser) *ExpireSessions {
	cmd := &ExpireSessions{}
	for range 1 + c.IntN(4) {
		if id := h.someSession(c); !slices.Contains(cmd.Sessions, id) || c.IntN(20) == 0 {
			cmd.Sessions = append(cmd.Sessions, id)
		}
	}
	if c.IntN(50) == 0 {
		cmd.Sessions = nil
	}
	return cmd
}

func (h *harness) genSession(c chooser) *CreateSession {
	cs := &CreateSession{Name: fmt.Sprintf("client-%d", c.IntN(5)), TTL: 10 * time.Second}
	cs.Ordered = c.IntN(6) == 0
	switch c.IntN(4) {
	case 0:
		cs.OnDeadlock = Abort
	case 1, 2:
		cs.OnDeadlock = SurrenderLock
	}
	if c.IntN(3) == 0 {
		cs.LockDelay = time.Second + secs(c, 5)
	}
	if c.IntN(20) == 0 { // invalid options
		switch c.IntN(5) {
		case 0:
			cs.TTL = 0
		case 1:
			cs.LockDelay = 2 * MaxLockDelay
		case 2:
			cs.OnDeadlock = "retry"
		case 3:
			cs.Name = strings.Repeat("n", MaxSessionName+1)
		case 4:
			cs.Name = "\xff"
		}
	}
	return cs
}

func (h *harness) genAcquire(c chooser) *Acquire {
	a := &Acquire{Session: h.someSession(c)}
	n := 1 + c.IntN(3)
	names := slices.Clone(modelNames)
	for i := len(names) - 1; i > 0; i-- {
		j := c.IntN(i + 1)
		names[i], names[j] = names[j], names[i]
	}
	names = names[:n]
	if c.IntN(3) == 0 {
		slices.Sort(names) // what an ordered session would do
	}
	if n > 1 && c.IntN(40) == 0 {
		names[1] = names[0] // invalid: named twice
	}
	for _, name := range names {
		sp := LockSpec{Name: name, Mode: Write}
		if c.IntN(5) < 2 {
			sp.Mode = Read
		}
		lim := max(modelLimit[name], 1)
		inUse := false
		if li := h.prev.locks[name]; li != nil && li.Limit > 0 {
			lim, inUse = li.Limit, true
		}
		switch r := c.IntN(20); {
		case r == 0:
			sp.Limit = 1 + c.IntN(4) // may not match
		case r < 8 || !inUse:
			sp.Limit = lim
		}
		switch {
		case c.IntN(50) == 0:
			sp.Weight = lim + 1 // invalid (or just over)
		case sp.Mode == Write && lim > 1:
			sp.Weight = 1 + c.IntN(lim)
		}
		if c.IntN(3) == 0 {
			sp.Value = pick(c, modelValues)
		}
		if c.IntN(100) == 0 {
			sp = pick(c, badSpecs)
		}
		a.Locks = append(a.Locks, sp)
	}
	if c.IntN(200) == 0 {
		a.Locks = nil // invalid: no locks
	}
	a.Require = pick(c, []quorum.Requirement{"", "all", "any", "majority", "any", "majority"})
	if c.IntN(100) == 0 {
		a.Require = "most"
	}
	if c.IntN(20) < 13 {
		a.Wait = time.Second + secs(c, 20)
	}
	if c.IntN(5) == 0 {
		a.HoldTTL = time.Second + secs(c, 12)
	}
	switch c.IntN(200) { // invalid durations
	case 0:
		a.Wait = -time.Second
	case 1:
		a.Wait = 2 * MaxWait
	case 2:
		a.HoldTTL = -time.Second
	}
	switch r := c.IntN(40); {
	case r < 15:
		a.RequestID = fmt.Sprintf("s%d-q%d", a.Session, c.IntN(6)) // the session's own ids
	case r < 18:
		a.RequestID = fmt.Sprintf("q%d", c.IntN(3)) // shared: may belong to another session
	case r == 18:
		a.RequestID = pick(c, []string{"~mine", "q/1", "q\x01", strings.Repeat("r", MaxRequestIDLen+1), "\xff"})
	}
	if a.RequestID != "" {
		// Both rules: ids scoped to the session (logs since
		// FormatSessionRequestIDs) and one namespace for all (before).
		a.SessionScoped = c.IntN(2) == 0
	}
	h.lastAcq[a.Session] = a
	return a
}

// badSpecs are lock specs that Apply must refuse.
var badSpecs = []LockSpec{
	{Name: "a//b", Mode: Write},
	{Name: "/a", Mode: Read},
	{Name: "a\x01", Mode: Read},
	{Name: "\xffa", Mode: Read},
	{Name: strings.Repeat("s/", MaxSegments) + "s", Mode: Read},
	{Name: strings.Repeat("l", MaxSegmentLen+1), Mode: Read},
	{Name: "a", Mode: 3},
	{Name: "b", Mode: Write, Limit: -1},
	{Name: "b", Mode: Write, Limit: MaxLimit + 1},
	{Name: "c", Mode: Read, Weight: 2},
	{Name: "c", Mode: Write, Weight: -1},
	{Name: "a", Mode: Write, Value: strings.Repeat("v", MaxValueLen+1)},
	{Name: "a", Mode: Read, Value: "\xff"},
}

// modelValues are the values holds are given: few, so that a proclaim
// often sets the value a hold already has.
var modelValues = []string{"", "10.0.0.1:80", "10.0.0.2:80", strings.Repeat("v", MaxValueLen)}

// genProclaim is usually a proclaim by a holder on a name it holds, now
// and then with the hold's token (or another), or with a bad value.
func (h *harness) genProclaim(c chooser) *Proclaim {
	s := h.someHolder(c)
	p := &Proclaim{Session: s, Name: h.someHeld(c, s), Value: pick(c, modelValues)}
	switch c.IntN(6) {
	case 0:
		if hd := h.prev.holdOf(s, p.Name); hd != nil {
			p.Token = hd.Token
		}
	case 1:
		p.Token = 1 + uint64(c.IntN(int(h.index)+1)) // usually not the hold's
	}
	if c.IntN(40) == 0 {
		p.Value = pick(c, []string{strings.Repeat("v", MaxValueLen+1), "\xff"})
	}
	return p
}

// genRetry repeats a session's last acquire with a client request id (an
// idempotent retry), or makes a new acquire.
func (h *harness) genRetry(c chooser) Command {
	var ss []SessionID
	for s, a := range h.lastAcq {
		if a.RequestID != "" {
			ss = append(ss, s)
		}
	}
	if len(ss) == 0 {
		return h.genAcquire(c)
	}
	slices.Sort(ss)
	a := *h.lastAcq[pick(c, ss)]
	if c.IntN(2) == 0 {
		a.Locks = []LockSpec{{Name: "c", Mode: Read}} // a retry is recognised by its id alone
	}
	return &a
}

func (h *harness) anyHeld() bool {
	return slices.ContainsFunc(h.prev.sessions, func(s SessionInfo) bool { return len(s.Held) > 0 })
}

func (h *harness) anyPending() bool {
	return slices.ContainsFunc(h.prev.reqOrder, func(r *RequestRecord) bool { return r.Status == Pending })
}

// someHolder is usually a session that holds something.
func (h *harness) someHolder(c chooser) SessionID {
	var ss []SessionID
	for _, s := range h.prev.sessions {
		if len(s.Held) > 0 {
			ss = append(ss, s.ID)
		}
	}
	if len(ss) == 0 || c.IntN(8) == 0 {
		return h.someSession(c)
	}
	return pick(c, ss)
}

// someHeld is usually a name s holds.
func (h *harness) someHeld(c chooser, s SessionID) string {
	if si := h.prev.sess[s]; si != nil && len(si.Held) > 0 && c.IntN(10) != 0 {
		return pick(c, si.Held).Name
	}
	if c.IntN(100) == 0 {
		return "/bad"
	}
	return pick(c, modelNames)
}

// someRequest is usually one of s's requests with status st.
func (h *harness) someRequest(c chooser, s SessionID, st Status) string {
	var ids []string
	for _, r := range h.prev.reqOrder {
		if r.Session == s && (r.Status == st || c.IntN(4) == 0) {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) > 0 && c.IntN(8) != 0 {
		return pick(c, ids)
	}
	return fmt.Sprintf("s%d-q%d", s, c.IntN(6))
}

func (h *harness) genCancel(c chooser) *Cancel {
	var pend []*RequestRecord
	for _, r := range h.prev.reqOrder {
		if r.Status == Pending {
			pend = append(pend, r)
		}
	}
	if len(pend) == 0 || c.IntN(12) == 0 {
		cc := &Cancel{Session: h.someSession(c), RequestID: fmt.Sprintf("q%d", c.IntN(8))}
		if c.IntN(10) == 0 {
			cc.RequestID = pick(c, []string{"", strings.Repeat("r", MaxRequestIDLen+1)}) // invalid
		}
		return cc
	}
	r := pick(c, pend)
	cc := &Cancel{RequestID: r.ID, Session: r.Session}
	switch c.IntN(10) {
	case 0, 1, 2:
		cc.Session = 0
	case 3:
		cc.Session = h.someSession(c)
	}
	return cc
}

// ---- the harness -----------------------------------------------------------

// failure is the first violation of one check in one seed.
type failure struct {
	check  string
	op     int    // operations applied up to and including the failing one
	report string // message and trace
}

type harness struct {
	label     string
	calm      bool // few, long-lived sessions
	a, b      *Table
	m         *refTable
	index     uint64
	now       int64
	ops       int
	prev      *tabView
	maxTok    map[string]uint64 // largest token ever issued per name
	gone      []SessionID
	lastAcq   map[SessionID]*Acquire
	trace     []string
	log       []logEntry
	stepViol  []violation
	failures  []*failure     // first violation of each check
	tolerated map[string]int // violations of tolerated checks, by check
}

type logEntry struct {
	e     Entry
	stale bool
}

func newHarness(label string) *harness {
	h := &harness{label: label, a: New(), b: New(), m: newRefTable(), now: int64(time.Hour), tolerated: map[string]int{},
		maxTok: map[string]uint64{}, lastAcq: map[SessionID]*Acquire{}}
	h.prev = viewOf(h.a)
	return h
}

func (h *harness) fail(check, format string, args ...any) {
	h.stepViol = append(h.stepViol, violation{check, fmt.Sprintf(format, args...)})
}

// failed reports whether check has failed in this harness.
func (h *harness) failed(check string) bool {
	return slices.ContainsFunc(h.failures, func(f *failure) bool { return f.check == check })
}

// endStep records the step's violations and rebuilds the model or the twin
// from the engine when they disagreed with it, so that the run can go on.
func (h *harness) endStep() {
	viol := h.stepViol
	h.stepViol = nil
	if len(viol) == 0 {
		return
	}
	for _, v := range viol {
		switch {
		case v.check == "model" && len(viol) > 1:
			// The model disagrees because of a violation reported with it.
		case tolerated(v.check):
			h.tolerated[v.check]++
		case !h.failed(v.check):
			h.failures = append(h.failures, &failure{check: v.check, op: h.ops,
				report: fmt.Sprintf("%s, operation %d (index %d): [%s] %s\nlast operations (oldest first):\n  %s",
					h.label, h.ops, h.index, v.check, v.msg, strings.Join(h.trace, "\n  "))})
		}
	}
	if slices.ContainsFunc(viol, func(v violation) bool { return v.check == "model" }) {
		h.m = refFromTable(h.a)
	}
	if slices.ContainsFunc(viol, func(v violation) bool {
		return v.check == "twin" || v.check == "err-digest" || v.check == "snapshot" || v.check == "stale-index"
	}) {
		if b, err := roundTrip(h.a); err == nil {
			h.b = b
		}
	}
}

func (h *harness) record(s string) {
	if len(h.trace) == traceLen {
		h.trace = h.trace[1:]
	}
	h.trace = append(h.trace, s)
}

// step applies one operation to the three tables and checks everything.
func (h *harness) step(o op) {
	idx := h.index + o.gap
	if o.gap == 0 {
		idx = h.index // a replayed index: refused, changes nothing
	}
	h.apply(Entry{Index: idx, Now: h.now + int64(o.dt), Cmd: o.cmd}, o.gap == 0)
}

// apply applies one entry to the three tables and checks everything. A
// stale entry re-uses the last index and must be refused.
func (h *harness) apply(e Entry, stale bool) {
	defer h.endStep()
	if stale {
		e.Index = h.index
	}
	h.ops++
	h.now = e.Now
	h.log = append(h.log, logEntry{e, stale})
	idx := e.Index
	pre := h.prev
	var preDigest [32]byte
	if stale {
		preDigest = h.a.Digest()
	}

	ra := h.a.Apply(e)
	h.record(fmt.Sprintf("#%d now=+%v %s -> %s", idx, time.Duration(h.now-int64(time.Hour)), fmtCmd(e.Cmd), fmtResult(ra)))

	if stale {
		if ra.Err == nil || ra.Err.Code != CodeInvalid || len(ra.Events) > 0 {
			h.fail("stale-index", "a replayed index was not refused: %+v", ra)
		}
		if h.a.Index() != pre.index || h.a.Clock() != pre.clock || h.a.Digest() != preDigest {
			h.fail("stale-index", "a replayed index changed the table")
		}
		if rm := h.m.Apply(e); rm.err != CodeInvalid {
			h.fail("model", "model accepted a replayed index")
		}
		return
	}
	h.index = idx

	// The twin: the same entry, or a Tick if a refused it.
	eb := e
	if ra.Err != nil {
		eb.Cmd = &Tick{}
	}
	rb := h.b.Apply(eb)
	post := viewOf(h.a)
	if ra.Err != nil {
		if !reflect.DeepEqual(ra.Events, rb.Events) {
			h.fail("err-digest", "a failed command emitted events a Tick did not:\n got %+v\nwant %+v", ra.Events, rb.Events)
		} else if h.a.Digest() != h.b.Digest() || !reflect.DeepEqual(post.records, exportAll(h.b)) {
			h.fail("err-digest", "a command that failed with %v changed the table (its Digest or Export differs from a Tick's)", ra.Err)
		}
	} else if !reflect.DeepEqual(ra, rb) {
		h.fail("twin", "the twin table (same log, restored from snapshots) produced a different result:\n a: %+v\n b: %+v", ra, rb)
	}

	for _, v := range checkInvariants(pre, post, e, ra, h.a, h.maxTok) {
		h.fail(v.check, "%s", v.msg)
	}

	// The reference model.
	rm := h.m.Apply(e)
	h.compareModel(e, ra, rm, post)

	// Bookkeeping for the generator.
	if c, ok := e.Cmd.(*CloseSession); ok && ra.Err == nil {
		h.gone = append(h.gone, c.Session)
	}
	if c, ok := e.Cmd.(*ExpireSession); ok && ra.Err == nil {
		h.gone = append(h.gone, c.Session)
	}
	if c, ok := e.Cmd.(*ExpireSessions); ok && ra.Err == nil {
		for _, id := range c.Sessions {
			if !slices.Contains(h.gone, id) && pre.sess[id] != nil {
				h.gone = append(h.gone, id)
			}
		}
	}
	for _, s := range pre.sessions {
		if post.sess[s.ID] == nil {
			delete(h.lastAcq, s.ID)
		}
	}
	h.prev = post

	// Now and then rebuild the twin from a's snapshot.
	if h.ops%97 == 0 && len(h.stepViol) == 0 {
		nb, err := roundTrip(h.a)
		if err != nil {
			h.fail("snapshot", "export/load: %v", err)
		} else if !reflect.DeepEqual(exportAll(nb), post.records) || nb.Digest() != h.a.Digest() {
			h.fail("snapshot", "a table loaded from an export exports something else (or has a different Digest)")
		} else {
			h.b = nb
		}
	}
}

// exportAll returns every record t exports.
func exportAll(t *Table) []Record {
	var recs []Record
	_ = t.Export(func(rec Record) error {
		recs = append(recs, rec)
		return nil
	})
	return recs
}

// roundTrip rebuilds a table from its Export.
func roundTrip(t *Table) (*Table, error) { return loadAll(exportAll(t)) }

// loadAll builds a table from records in Export's order, the Header
// first.
func loadAll(recs []Record) (*Table, error) {
	h, ok := recs[0].(*Header)
	if !ok {
		return nil, fmt.Errorf("export starts with a %T", recs[0])
	}
	l, err := NewLoader(*h)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs[1:] {
		if err := l.Load(rec); err != nil {
			return nil, err
		}
	}
	return l.Table()
}

func (h *harness) compareModel(e Entry, ra Result, rm refResult, post *tabView) {
	var gotCode Code
	if ra.Err != nil {
		gotCode = ra.Err.Code
	}
	switch {
	case gotCode != rm.err:
		h.fail("model", "error: engine %q, model %q", gotCode, rm.err)
		return
	case ra.Session != rm.session:
		h.fail("model", "session: engine %d, model %d", ra.Session, rm.session)
		return
	case !reflect.DeepEqual(ra.Request, rm.request):
		h.fail("model", "request:\n engine %+v\n model  %+v", ra.Request, rm.request)
		return
	case !reflect.DeepEqual(proclaimedOf(ra, post), rm.proclaim):
		h.fail("model", "proclaim: engine %+v, model %+v", ra.Proclaimed, rm.proclaim)
		return
	case !slices.Equal(ra.Released, rm.released) || ra.Kept != rm.kept:
		h.fail("model", "release/surrender: engine released %v kept %v, model released %v kept %v",
			ra.Released, ra.Kept, rm.released, rm.kept)
		return
	case !slices.Equal(ra.Events, rm.events):
		h.fail("model", "events:\n engine %s\n model  %s", fmtEvents(ra.Events), fmtEvents(rm.events))
		return
	}
	got, want := engineDump(post), h.m.dump()
	if !reflect.DeepEqual(got, want) {
		h.fail("model", "state differs (- engine, + model):\n%s", diffDumps(got, want))
	}
}

// proclaimedOf is a proclaim's result as the model predicts it: without
// the version, which the model does not keep, and which must be the
// name's version as the table shows it after the entry.
func proclaimedOf(ra Result, post *tabView) *Proclamation {
	p := ra.Proclaimed
	if p == nil {
		return nil
	}
	q := *p
	if li := post.locks[p.Name]; li != nil && li.Version == p.Version {
		q.Version = 0
	}
	return &q
}

// ---- observable state ------------------------------------------------------

// tabView is a table's state as its public API shows it.
type tabView struct {
	index    uint64
	clock    int64
	seq      uint64
	locks    map[string]*LockInfo
	names    []string // sorted
	sessions []SessionInfo
	sess     map[SessionID]*SessionInfo
	reqs     map[reqKey]*RequestRecord
	reqOrder []*RequestRecord // by arrival
	done     map[SessionID][]string
	next     int64
	hasNext  bool
	graph    []Edge
	versions map[string]uint64 // Version of every name of the universe
	records  []Record          // everything Export gave
}

// reqKey names a request: ids are unique per session.
type reqKey struct {
	s  SessionID
	id string
}

func viewOf(t *Table) *tabView {
	v := &tabView{index: t.Index(), clock: t.Clock(), locks: map[string]*LockInfo{},
		sess: map[SessionID]*SessionInfo{}, reqs: map[reqKey]*RequestRecord{}, done: map[SessionID][]string{}}
	for _, li := range t.Locks("") {
		v.locks[li.Name] = &li
		v.names = append(v.names, li.Name)
	}
	v.sessions = t.Sessions()
	for i := range v.sessions {
		v.sess[v.sessions[i].ID] = &v.sessions[i]
	}
	_ = t.Export(func(rec Record) error {
		v.records = append(v.records, rec)
		switch r := rec.(type) {
		case *Header:
			v.seq = r.Seq
		case *SessionRecord:
			v.done[r.ID] = r.Done
		case *RequestRecord:
			v.reqs[reqKey{r.Session, r.ID}] = r
			v.reqOrder = append(v.reqOrder, r)
		}
		return nil
	})
	v.next, v.hasNext = t.NextDeadline()
	v.graph = t.WaitGraph()
	v.versions = make(map[string]uint64, len(modelNames))
	for _, name := range modelNames {
		v.versions[name] = t.Version(name)
	}
	return v
}

func (v *tabView) holdOf(s SessionID, name string) *Holder {
	if li := v.locks[name]; li != nil {
		for i := range li.Holders {
			if li.Holders[i].Session == s {
				return &li.Holders[i]
			}
		}
	}
	return nil
}

func (v *tabView) pending() []*RequestRecord {
	var out []*RequestRecord
	for _, r := range v.reqOrder {
		if r.Status == Pending {
			out = append(out, r)
		}
	}
	return out
}

// dumpState is the comparable state of the engine or of the model.
type dumpState struct {
	Clock      int64
	Seq        uint64
	Next       int64
	HasNext    bool
	Sessions   []dumpSession
	Locks      []dumpLock
	RequestIDs []string      // every remembered request, by arrival
	Requests   []dumpRequest // the pending ones and those that ended in this entry
	Graph      []Edge
}

type dumpSession struct {
	ID         SessionID
	Name       string
	TTL        time.Duration
	OnDeadlock OnDeadlock
	Ordered    bool
	LockDelay  time.Duration
	Held       []HeldLock
	Pending    []string
	Done       []string
}

type dumpLock struct {
	Name    string
	Limit   int
	Delay   int64
	Holders []Holder
	Waiters []Waiter
}

type dumpRequest struct {
	ID       string
	Session  SessionID
	Seq      uint64
	Locks    []LockSpec
	Need     int
	HoldTTL  time.Duration
	Deadline int64
	Restore  int
	Status   Status
	Token    uint64
	Granted  []Grant
	Created  uint64
	Ended    uint64
	Upgrade  []bool
}

func engineDump(v *tabView) dumpState {
	d := dumpState{Clock: v.clock, Seq: v.seq, Next: v.next, HasNext: v.hasNext, Graph: clip(v.graph)}
	for _, s := range v.sessions {
		d.Sessions = append(d.Sessions, dumpSession{ID: s.ID, Name: s.Name, TTL: s.TTL, OnDeadlock: s.OnDeadlock,
			Ordered: s.Ordered, LockDelay: s.LockDelay, Held: clip(s.Held), Pending: clip(s.Pending), Done: clip(v.done[s.ID])})
	}
	for _, name := range v.names {
		li := v.locks[name]
		d.Locks = append(d.Locks, dumpLock{Name: name, Limit: li.Limit, Delay: li.DelayedUntil,
			Holders: clip(li.Holders), Waiters: clip(li.Waiters)})
	}
	for _, r := range v.reqOrder {
		d.RequestIDs = append(d.RequestIDs, r.ID)
		if r.Status != Pending && r.Ended != v.index {
			continue // finished earlier: compared when it finished
		}
		d.Requests = append(d.Requests, dumpRequest{ID: r.ID, Session: r.Session, Seq: r.Seq, Locks: clip(r.Locks),
			Need: r.Need, HoldTTL: r.HoldTTL, Deadline: r.Deadline, Restore: r.Restore, Status: r.Status,
			Token: r.Token, Granted: clip(r.Granted), Created: r.Created, Ended: r.Ended, Upgrade: clip(r.Upgrade)})
	}
	return d
}

func (m *refTable) dump() dumpState {
	d := dumpState{Clock: m.clock, Seq: m.seq, Graph: m.edges()}
	d.Next, d.HasNext = m.nextDeadline()
	for _, id := range m.sessionIDs() {
		s := m.sessions[id]
		ds := dumpSession{ID: id, Name: s.name, TTL: s.ttl, OnDeadlock: s.onDeadlock, Ordered: s.ordered, LockDelay: s.lockDelay}
		var hs []*refHold
		for _, h := range m.holds {
			if h.sess == id {
				hs = append(hs, h)
			}
		}
		slices.SortFunc(hs, func(a, b *refHold) int { return strings.Compare(a.name, b.name) })
		for _, h := range hs {
			ds.Held = append(ds.Held, HeldLock{Name: h.name, Holder: h.view()})
		}
		for _, r := range m.pending {
			if r.sess == id {
				ds.Pending = append(ds.Pending, r.id)
			}
		}
		for _, r := range s.done {
			if m.reqs[r.key()] == r {
				ds.Done = append(ds.Done, r.id)
			}
		}
		d.Sessions = append(d.Sessions, ds)
	}
	var names []string
	for name := range m.delays {
		names = append(names, name)
	}
	for _, h := range m.holds {
		names = append(names, h.name)
	}
	for _, r := range m.pending {
		for _, sp := range r.specs {
			names = append(names, sp.Name)
		}
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		dl := dumpLock{Name: name, Limit: m.limits[name], Delay: m.delays[name]}
		for _, h := range m.holds {
			if h.name == name {
				dl.Holders = append(dl.Holders, h.view())
			}
		}
		for _, r := range m.pending {
			for _, sp := range r.specs {
				if sp.Name == name {
					dl.Waiters = append(dl.Waiters, Waiter{Session: r.sess, Key: PublicID(r.sess, ""), RequestID: r.id, Mode: sp.Mode, Weight: sp.Weight, Seq: r.seq, Created: r.created, Value: sp.Value})
				}
			}
		}
		d.Locks = append(d.Locks, dl)
	}
	m.remembered = slices.DeleteFunc(m.remembered, func(r *refReq) bool { return m.reqs[r.key()] != r })
	for _, r := range m.remembered {
		d.RequestIDs = append(d.RequestIDs, r.id)
		if r.status != Pending && r.ended != m.index {
			continue
		}
		dr := dumpRequest{ID: r.id, Session: r.sess, Seq: r.seq, Locks: clip(r.specs), Need: r.need, HoldTTL: r.holdTTL,
			Deadline: r.deadline, Restore: r.restore, Status: r.status, Token: r.token, Granted: clip(r.granted),
			Created: r.created, Ended: r.ended}
		if r.status == Pending {
			dr.Upgrade = clip(r.upgrade)
		}
		d.Requests = append(d.Requests, dr)
	}
	return d
}

func (h *refHold) view() Holder {
	return Holder{Session: h.sess, Key: PublicID(h.sess, ""), Mode: h.mode, Weight: h.weight, Count: h.count, Token: h.token, Expires: h.expires,
		Value: h.value}
}

// clip returns a copy of xs, nil when empty, so that DeepEqual does not
// tell nil from empty.
func clip[T any](xs []T) []T { return append([]T(nil), xs...) }

// diffDumps lists the parts of two dumps that differ.
func diffDumps(got, want dumpState) string {
	lines := func(d dumpState) []string {
		out := []string{fmt.Sprintf("clock=%d seq=%d next=%d/%v", d.Clock, d.Seq, d.Next, d.HasNext),
			fmt.Sprintf("waitgraph %v", d.Graph), fmt.Sprintf("requests %v", d.RequestIDs)}
		for _, s := range d.Sessions {
			out = append(out, fmt.Sprintf("session %+v", s))
		}
		for _, l := range d.Locks {
			out = append(out, fmt.Sprintf("lock %+v", l))
		}
		for _, r := range d.Requests {
			out = append(out, fmt.Sprintf("request %+v", r))
		}
		return out
	}
	g, w := lines(got), lines(want)
	var b strings.Builder
	for _, l := range g {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			fmt.Fprintf(&b, "  + %s\n", l)
		}
	}
	return b.String()
}

// ---- formatting for traces ------------------------------------------------

func fmtCmd(c Command) string {
	switch c := c.(type) {
	case *CreateSession:
		return fmt.Sprintf("create(od=%s ordered=%v delay=%v ttl=%v)", c.OnDeadlock, c.Ordered, c.LockDelay, c.TTL)
	case *CloseSession:
		return fmt.Sprintf("close(%d)", c.Session)
	case *ExpireSession:
		return fmt.Sprintf("expire(%d)", c.Session)
	case *ExpireSessions:
		return fmt.Sprintf("expire(%v)", c.Sessions)
	case *Acquire:
		var locks []string
		for _, sp := range c.Locks {
			s := fmt.Sprintf("%s:%s", sp.Name, sp.Mode)
			if sp.Weight != 0 || sp.Limit != 0 {
				s += fmt.Sprintf("/w%d/l%d", sp.Weight, sp.Limit)
			}
			locks = append(locks, s)
		}
		s := fmt.Sprintf("acquire(s=%d id=%q [%s] req=%s wait=%v", c.Session, c.RequestID, strings.Join(locks, " "), c.Require, c.Wait)
		if c.HoldTTL != 0 {
			s += fmt.Sprintf(" ttl=%v", c.HoldTTL)
		}
		if c.SessionScoped {
			s += " scoped"
		}
		return s + ")"
	case *Release:
		return fmt.Sprintf("release(s=%d name=%q id=%q)", c.Session, c.Name, c.RequestID)
	case *Surrender:
		return fmt.Sprintf("surrender(s=%d %q)", c.Session, c.Name)
	case *Cancel:
		return fmt.Sprintf("cancel(s=%d %q)", c.Session, c.RequestID)
	case *Proclaim:
		return fmt.Sprintf("proclaim(s=%d %q %.12q tok=%d)", c.Session, c.Name, c.Value, c.Token)
	case *Tick:
		return "tick"
	case nil:
		return "<nil command>"
	}
	return fmt.Sprintf("%T", c)
}

func fmtResult(r Result) string {
	var parts []string
	if r.Err != nil {
		parts = append(parts, "err="+string(r.Err.Code))
	}
	if r.Session != 0 {
		parts = append(parts, fmt.Sprintf("session=%d", r.Session))
	}
	if q := r.Request; q != nil {
		parts = append(parts, fmt.Sprintf("%s:%s tok=%d", q.ID, q.Status, q.Token))
	}
	if r.Released != nil {
		parts = append(parts, fmt.Sprintf("released=%v", r.Released))
	}
	if r.Kept {
		parts = append(parts, "kept")
	}
	if len(r.Events) > 0 {
		parts = append(parts, fmtEvents(r.Events))
	}
	if len(parts) == 0 {
		return "ok"
	}
	return strings.Join(parts, " ")
}

func fmtEvents(evs []Event) string {
	var parts []string
	for _, e := range evs {
		s := fmt.Sprintf("%s(s%d", e.Kind, e.Session)
		if e.RequestID != "" {
			s += " " + e.RequestID
		}
		if e.Name != "" {
			s += " " + e.Name
		}
		if e.Token != 0 {
			s += fmt.Sprintf(" t%d", e.Token)
		}
		parts = append(parts, s+")")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// replay runs a recorded log through a fresh harness.
func replay(log []logEntry) *harness {
	h := newHarness("replay")
	for _, le := range log {
		h.apply(le.e, le.stale)
	}
	return h
}

// shrinkLog removes entries from a log for as long as it still fails
// check. Indexes and clocks stay as they were (the table accepts gaps), so
// session ids do not move.
func shrinkLog(log []logEntry, check string) []logEntry {
	fails := func(l []logEntry) bool { return replay(l).failed(check) }
	for changed := true; changed; {
		changed = false
		for chunk := len(log) / 2; chunk >= 1; chunk /= 2 {
			for i := 0; i+chunk <= len(log); {
				cand := append(slices.Clone(log[:i]), log[i+chunk:]...)
				if fails(cand) {
					log, changed = cand, true
				} else {
					i += chunk
				}
			}
		}
	}
	return log
}

// fmtLog replays a log and shows it with its results and check's failure.
func fmtLog(log []logEntry, check string) string {
	h := newHarness("replay")
	var b strings.Builder
	for _, le := range log {
		h.apply(le.e, le.stale)
		fmt.Fprintf(&b, "  %s\n", h.trace[len(h.trace)-1])
	}
	for _, f := range h.failures {
		if f.check == check {
			fmt.Fprintf(&b, "  => %s\n", strings.SplitN(f.report, "\nlast operations", 2)[0])
		}
	}
	return b.String()
}
