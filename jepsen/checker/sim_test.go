package checker

import (
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// simLocks is an in-memory mutex service; buggy grants without checking.
type simLocks struct {
	mu     sync.Mutex
	holder map[string]map[int]bool // name -> processes (sessions)
	token  uint64
	buggy  bool
}

func (s *simLocks) try(proc int, name string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.holder[name]) > 0 && !s.buggy {
		return 0, false
	}
	s.token++
	if s.holder[name] == nil {
		s.holder[name] = map[int]bool{}
	}
	s.holder[name][proc] = true
	return s.token, true
}

func (s *simLocks) release(proc int, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder[name][proc] {
		delete(s.holder[name], proc)
		return true
	}
	return false
}

// drop ends every hold of proc (close or expiry).
func (s *simLocks) drop(proc int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ps := range s.holder {
		delete(ps, proc)
	}
}

// simRes is the fenced resource: one register, rejecting tokens below
// the largest seen (when fenced).
type simRes struct {
	mu     sync.Mutex
	fenced bool
	max    uint64
	seq    uint64
	reg    []int64
}

func (r *simRes) use(tok uint64, write []int64) ([]int64, uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fenced && tok < r.max {
		return nil, 0, false
	}
	r.max = max(r.max, tok)
	r.seq++
	if write != nil {
		r.reg = append([]int64(nil), write...)
	}
	return append([]int64(nil), r.reg...), r.seq, true
}

// simulate runs workers against the simulated service and records the
// history of a mutex workload with info acquires and expired sessions.
func simulate(t *testing.T, buggy bool) []history.Event {
	t.Helper()
	return simulateN(t, buggy, 5, 40)
}

// simulateN is simulate with workers clients of rounds rounds each.
func simulateN(t *testing.T, buggy bool, workers, rounds int) []history.Event {
	t.Helper()
	rec, err := history.NewRecorder("")
	if err != nil {
		t.Fatal(err)
	}
	locks := &simLocks{holder: map[string]map[int]bool{}, buggy: buggy}
	res := &simRes{fenced: !buggy}
	var procs, values atomic.Int64
	const name = "lock"
	g := history.Granted{Name: name, Mode: "write"}

	// round runs one acquire / read / write / release cycle; it returns
	// the process to continue as.
	round := func(rnd *rand.Rand, proc int, wait time.Duration) int {
		rec.Add(history.Event{Type: history.Invoke, Process: proc, F: history.Acquire, Locks: []history.Lock{{Name: name, Mode: "write"}}})
		var tok uint64
		ok := false
		for deadline := time.Now().Add(wait); ; {
			if tok, ok = locks.try(proc, name); ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
		if rnd.Intn(10) == 0 { // the client never heard back
			rec.Add(history.Event{Type: history.Info, Process: proc, F: history.Acquire, Error: "unavailable"})
			rec.Add(history.Event{Type: history.Invoke, Process: proc, F: history.Close})
			locks.drop(proc)
			rec.Add(history.Event{Type: history.OK, Process: proc, F: history.Close})
			return int(procs.Add(1))
		}
		if !ok {
			rec.Add(history.Event{Type: history.Fail, Process: proc, F: history.Acquire, Error: "timeout"})
			return proc
		}
		gt := g
		gt.Token = tok
		gs := []history.Granted{gt}
		rec.Add(history.Event{Type: history.OK, Process: proc, F: history.Acquire, Granted: gs, Token: tok})

		rec.Add(history.Event{Type: history.Invoke, Process: proc, F: history.ResRead, Granted: gs, Token: tok})
		read, seq, ok := res.use(tok, nil)
		if !ok {
			rec.Add(history.Event{Type: history.Fail, Process: proc, F: history.ResRead, Error: "stale"})
		} else {
			rec.Add(history.Event{Type: history.OK, Process: proc, F: history.ResRead, Read: read, Seq: seq})
		}
		if rnd.Intn(8) == 0 { // paused past the TTL: the session expires
			locks.drop(proc)
			time.Sleep(200 * time.Microsecond)
		}
		if ok {
			v := values.Add(1)
			rec.Add(history.Event{Type: history.Invoke, Process: proc, F: history.ResWrite, Granted: gs, Token: tok, Value: v})
			time.Sleep(time.Duration(rnd.Intn(50)) * time.Microsecond)
			if _, seq, ok := res.use(tok, append(read, v)); ok {
				rec.Add(history.Event{Type: history.OK, Process: proc, F: history.ResWrite, Seq: seq, Value: v})
			} else {
				rec.Add(history.Event{Type: history.Fail, Process: proc, F: history.ResWrite, Error: "stale"})
			}
		}
		rec.Add(history.Event{Type: history.Invoke, Process: proc, F: history.Release, Names: []string{name}})
		if locks.release(proc, name) {
			rec.Add(history.Event{Type: history.OK, Process: proc, F: history.Release})
			return proc
		}
		rec.Add(history.Event{Type: history.Fail, Process: proc, F: history.Release, Error: "not_held"})
		rec.Add(history.Event{Type: history.Info, Process: proc, F: history.Lost})
		return int(procs.Add(1))
	}

	var wg sync.WaitGroup
	last := make([]int, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(w)))
			proc := int(procs.Add(1))
			for range rounds {
				proc = round(rnd, proc, 2*time.Millisecond)
			}
			last[w] = proc
		}()
	}
	wg.Wait()
	rec.Add(history.Event{Type: history.Info, Process: history.Harness, F: history.Phase, Fault: "final"})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proc := last[w]
			// The final phase has no faults: no info, no pause.
			rec.Add(history.Event{Type: history.Invoke, Process: proc, F: history.Acquire, Locks: []history.Lock{{Name: name, Mode: "write"}}})
			var tok uint64
			ok := false
			for deadline := time.Now().Add(time.Second); !ok && time.Now().Before(deadline); {
				if tok, ok = locks.try(proc, name); !ok {
					time.Sleep(20 * time.Microsecond)
				}
			}
			if !ok {
				rec.Add(history.Event{Type: history.Fail, Process: proc, F: history.Acquire, Error: "timeout"})
				return
			}
			gt := g
			gt.Token = tok
			rec.Add(history.Event{Type: history.OK, Process: proc, F: history.Acquire, Granted: []history.Granted{gt}, Token: tok})
			rec.Add(history.Event{Type: history.Invoke, Process: proc, F: history.Release, Names: []string{name}})
			locks.release(proc, name)
			rec.Add(history.Event{Type: history.OK, Process: proc, F: history.Release})
		}()
	}
	wg.Wait()
	res.mu.Lock()
	rec.Add(history.Event{Type: history.OK, Process: history.Harness, F: history.FinalRead, Values: map[string][]int64{name: res.reg}})
	res.mu.Unlock()
	return rec.Events()
}

func TestSimulatedCorrectService(t *testing.T) {
	ev := simulate(t, false)
	cfg := Config{Workload: "mutex", Fenced: true, LivenessBound: 5 * time.Second, OutDir: t.TempDir()}
	kinds := map[string]int{}
	for _, e := range ev {
		kinds[e.F+"/"+string(e.Type)]++
	}
	if kinds["acquire/info"] == 0 || kinds["lost/info"] == 0 {
		t.Errorf("history has no info acquire or no lost session: %v", kinds)
	}
	for _, r := range All(ev, cfg) {
		t.Logf("%s: %s %v %s", r.Checker, r.Verdict, r.Counts, r.Note)
		if !r.OK() {
			t.Errorf("%s: %s %v %v %s", r.Checker, r.Verdict, r.Anomalies, r.Counts, r.Note)
		}
	}
}

func TestSimulatedBuggyService(t *testing.T) {
	ev := simulate(t, true)
	cfg := Config{Workload: "mutex", LivenessBound: 5 * time.Second, OutDir: t.TempDir()}
	if r := Linearizable(ev, cfg); r.Verdict != Invalid || len(r.Files) != 1 {
		t.Errorf("linearizable: %s %v", r.Verdict, r.Anomalies)
	}
	if r := Safety(ev, cfg); r.Verdict != Invalid {
		t.Errorf("safety: %s %v", r.Verdict, r.Counts)
	}
}

// Cut into as many segments as the rules allow, the correct service's
// histories stay linearizable and the buggy one's do not.
func TestSimulatedServicesInSegments(t *testing.T) {
	defer func(n int) { minSegment = n }(minSegment)
	minSegment = 1
	for _, buggy := range []bool{false, true} {
		for range 3 {
			r := Linearizable(simulate(t, buggy), Config{Workload: "mutex", Fenced: !buggy})
			t.Logf("buggy %v: %s %v %s", buggy, r.Verdict, r.Counts, r.Note)
			if r.Verdict != map[bool]Verdict{false: Valid, true: Invalid}[buggy] || r.Counts["segments"] < 2 {
				t.Fatalf("buggy %v: %s in %d segments: %v", buggy, r.Verdict, r.Counts["segments"], r.Anomalies)
			}
		}
	}
}

// A long history of one name — 12 clients, thousands of grants, one in
// ten acquires of unknown outcome, sessions lost — gets a verdict within
// the suite's default bound (a 10,648-operation run once ended "unknown"
// at porcupine's bound), cut into segments. Its duration is
// logged, not asserted.
func TestLinearizableLongHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("long history")
	}
	ev := simulateN(t, false, 12, 1500)
	cfg := Config{Workload: "mutex", Fenced: true, LinearizabilityTimeout: 3 * time.Minute}
	start := time.Now()
	r := Linearizable(ev, cfg)
	t.Logf("%d events, %d operations: %s, %s (%v)", len(ev), r.Counts["operations"], r.Verdict, r.Note, time.Since(start))
	if r.Verdict != Valid || r.Counts["segments"] < 2 {
		t.Fatalf("verdict %s in %d segments on a correct service's history: %v", r.Verdict, r.Counts["segments"], r.Anomalies)
	}
}
