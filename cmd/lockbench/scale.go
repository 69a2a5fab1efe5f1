package main

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// defaultKeepaliveTTL is the TTL of the sessions --keepalive holds when
// --ttl is not given; each is kept alive every third of it, as the Go
// client does.
const defaultKeepaliveTTL = 15 * time.Second

// keepaliveConfig is one --keepalive run.
type keepaliveConfig struct {
	n, conns  int
	ttl       time.Duration
	warmup, d time.Duration
	spread    bool
	// batch: each worker sends the keepalives due within a linger (a
	// tenth of the period, at most 500ms) in one POST
	// /v1/sessions/keepalive, as the Go and Python clients do.
	batch bool
	// kill, when set, is the failover: halfway through the measured
	// window the leader every node names is killed with it (the harness
	// that owns the processes does it) and the clients follow the new one.
	kill func(addr string) error
	// resume, when set, makes kill a pause: the paused leader is resumed
	// pausedFor after the others name a new one, and wakes believing it
	// leads.
	resume    func(addr string) error
	pausedFor time.Duration
	// hold, when set, runs once a session is opened, before its first
	// keepalive: --mass-expiry's and --restart's sessions take a lock in it.
	hold func(hc *http.Client, base string, i int, id string) error
	// afterWindow, when set, runs after the measured window while the
	// keepalives go on (--restart).
	afterWindow func() error
}

// keepaliveResult is one --keepalive run: keepalives sent and refused
// and their latencies, each node's CPU (from its /metrics) over the
// measured window and memory once every session is open, and the
// sessions that were gone at the end.
type keepaliveResult struct {
	sent, errors int64
	requests     int64 // HTTP requests that carried the keepalives sent
	elapsed      time.Duration
	lat          []time.Duration    // successful keepalives' latencies, sorted
	cpu          map[string]float64 // node address -> % of one core; a killed node is absent
	memory       map[string]nodeMemory
	heapBefore   map[string]float64 // Go heap in use before the sessions were opened
	lost         int                // sessions not in the cluster's session list at the end
	opened       time.Duration      // how long opening every session took
	failover     *failoverResult
}

// failoverResult is what --failover measured.
type failoverResult struct {
	killed, leader string
	elected        time.Duration // from the kill until every survivor named the new leader
	rekept         time.Duration // from the kill until every session had a keepalive sent after it succeed; 0: not all did
	rekeptN        int64         // sessions kept alive after the kill
	errors         int64         // keepalives that failed after the kill
	paused         bool          // the leader was paused, then resumed, not killed
	rejoined       time.Duration // from the resume until every node named the new leader
	shed           float64       // requests the survivors turned away with Retry-After (--max-leader-waits)
}

// shedMetric counts a node's requests turned away while too many waited
// for a leader.
const shedMetric = `lockd_limit_refusals_total{limit="leader_waits"}`

// defaultPausedFor is how long --pause keeps the paused leader paused
// after the others name a new leader.
const defaultPausedFor = 5 * time.Second

// quantile returns the q-quantile of the keepalive latencies.
func (r *keepaliveResult) quantile(q float64) time.Duration {
	return (&result{lat: r.lat}).quantile(q)
}

// kaRun is the state the keepalive workers share. Each per-session
// slice element is written only by the worker that owns the session.
type kaRun struct {
	a       api
	hc      *http.Client
	cfg     keepaliveConfig
	period  time.Duration
	ids     []string
	targets atomic.Pointer[[]string] // where keepalives go: the leader, or with --spread the live nodes

	stop           chan struct{}
	measuring      atomic.Bool
	sent           atomic.Int64
	requests       atomic.Int64
	failed         atomic.Int64
	gone           atomic.Int64 // sessions that answered session_not_found
	killedAt       atomic.Int64 // UnixNano of the kill; 0 before it
	failedPostKill atomic.Int64
	rekept         atomic.Int64 // sessions kept alive by a keepalive sent after the kill
	rekeptAt       atomic.Int64 // UnixNano when the last of them was
	rekeptOne      []bool
	keptAt         []int64 // per session: UnixNano of the last keepalive (or the creation) that succeeded

	latMu sync.Mutex
	lat   []time.Duration

	liveMu sync.Mutex // guards the live nodes that followLeader asks

	createMu  sync.Mutex
	createErr error
}

// keepalives opens cfg.n sessions of cfg.ttl spread over targets and
// keeps every one alive every third of its TTL, each session on a fixed
// schedule with a random phase and a little jitter so that the
// keepalives arrive evenly rather than in bursts; at most cfg.conns
// requests are in flight. Sessions are kept alive from the moment they
// are created, so opening many of them never lets the first expire. The
// measured window (cfg.d) starts once every session is open and the
// warmup has passed. The CPU share is the growth of each node's
// process_cpu_seconds_total over it.
func keepalives(a api, targets, nodes []string, cfg keepaliveConfig) (*keepaliveResult, error) {
	if cfg.ttl < 3*time.Millisecond {
		return nil, fmt.Errorf("--ttl %v is too short", cfg.ttl)
	}
	run := newKaRun(a, targets, cfg)
	defer run.hc.CloseIdleConnections()
	r := &keepaliveResult{elapsed: cfg.d, cpu: map[string]float64{}, memory: map[string]nodeMemory{}}
	r.heapBefore = heapInUse(run.hc, a, nodes)

	start := time.Now()
	stop, err := run.open()
	defer run.deleteAll()
	defer stop()
	if err != nil {
		return nil, err
	}
	r.opened = time.Since(start)
	live := slices.Clone(nodes)
	if !cfg.spread {
		go run.followLeader(&live)
	}
	time.Sleep(cfg.warmup)
	r.memory = nodeMemories(run.hc, a, nodes)
	before, err := cpuSeconds(run.hc, a, nodes)
	if err != nil {
		return nil, fmt.Errorf("read /metrics: %w", err)
	}
	run.measuring.Store(true)
	sent0, failed0, requests0 := run.sent.Load(), run.failed.Load(), run.requests.Load()
	if cfg.kill != nil {
		time.Sleep(cfg.d / 2)
		if r.failover, err = run.failover(nodes, &live); err != nil {
			return nil, err
		}
		time.Sleep(cfg.d - cfg.d/2)
	} else {
		time.Sleep(cfg.d)
	}
	after, _ := cpuSeconds(run.hc, a, live)
	run.measuring.Store(false)
	r.sent, r.errors, r.requests = run.sent.Load()-sent0, run.failed.Load()-failed0, run.requests.Load()-requests0
	for _, node := range live {
		r.cpu[node] = 100 * (after[node] - before[node]) / cfg.d.Seconds()
	}
	run.latMu.Lock()
	r.lat = slices.Clone(run.lat)
	run.latMu.Unlock()
	slices.Sort(r.lat)
	if f := r.failover; f != nil {
		for _, node := range live {
			if m, err := metrics(run.hc, a, node, shedMetric); err == nil {
				f.shed += m[shedMetric]
			}
		}
		f.rekeptN, f.errors = run.rekept.Load(), run.failedPostKill.Load()
		if f.rekeptN == int64(cfg.n) {
			f.rekept = time.Duration(run.rekeptAt.Load() - run.killedAt.Load())
		}
	}
	if r.lost, err = run.lost(); err != nil {
		return nil, err
	}
	if cfg.afterWindow != nil {
		if err := cfg.afterWindow(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// newKaRun prepares a run of cfg.n sessions spread over targets.
func newKaRun(a api, targets []string, cfg keepaliveConfig) *kaRun {
	period := cfg.ttl / 3
	run := &kaRun{a: a, cfg: cfg, period: period, ids: make([]string, cfg.n), stop: make(chan struct{}),
		hc: a.client(cfg.conns, min(period, 10*time.Second)), rekeptOne: make([]bool, cfg.n), keptAt: make([]int64, cfg.n)}
	run.targets.Store(&targets)
	return run
}

// open starts the workers and returns once every session is open, each
// kept alive from its opening; stop ends the keepalives (every session
// then runs out its TTL) and returns once the workers have.
func (run *kaRun) open() (stop func(), err error) {
	var created, done sync.WaitGroup
	for w := range run.cfg.conns {
		created.Add(1)
		done.Add(1)
		go func() { defer done.Done(); run.worker(w, &created) }()
	}
	stop = sync.OnceFunc(func() { close(run.stop); done.Wait() })
	created.Wait()
	if run.createErr != nil {
		return stop, fmt.Errorf("open sessions: %w", run.createErr)
	}
	return stop, nil
}

// dueSession is a session's next keepalive: due at base plus jitter;
// base advances by a whole period each time, so jitter never drifts the
// schedule.
type dueSession struct {
	due, base time.Time
	i         int
}

type dueHeap []dueSession

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueSession)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// worker w owns sessions w, w+conns, ...: it opens them one by one,
// keeping those already open alive on schedule in between, tells created
// when all are open (or one could not be), and then keeps them alive
// until stop.
func (run *kaRun) worker(w int, created *sync.WaitGroup) {
	var (
		h       dueHeap
		next    = w
		backoff time.Duration
		timer   = time.NewTimer(time.Hour)
	)
	defer timer.Stop()
	if next >= run.cfg.n {
		created.Done()
	}
	for {
		select {
		case <-run.stop:
			return
		default:
		}
		now := time.Now()
		switch {
		case len(h) > 0 && !h[0].due.After(now):
			if pause := run.keepalive(&h, &backoff); pause > 0 {
				timer.Reset(pause)
				select {
				case <-run.stop:
					return
				case <-timer.C:
				}
			}
		case next < run.cfg.n:
			if !run.create(&h, next) {
				created.Done()
				<-run.stop
				return
			}
			if next += run.cfg.conns; next >= run.cfg.n {
				created.Done()
			}
		case len(h) > 0:
			timer.Reset(h[0].due.Sub(now))
			select {
			case <-run.stop:
				return
			case <-timer.C:
			}
		default:
			<-run.stop
			return
		}
	}
}

// target is the node that session i talks to.
func (run *kaRun) target(i int) string {
	t := *run.targets.Load()
	return run.a.url(t[i%len(t)])
}

// create opens session i and schedules its first keepalive at a random
// point of the period after now (a random phase per session is what
// spreads the keepalives evenly). It reports false, having noted the
// error, if the session could not be opened.
func (run *kaRun) create(h *dueHeap, i int) bool {
	id, err := createSessionTTL(run.hc, run.target(i), run.cfg.ttl)
	if err == nil {
		run.ids[i] = id
		run.keptAt[i] = time.Now().UnixNano()
		if run.cfg.hold != nil {
			err = run.cfg.hold(run.hc, run.target(i), i, id)
		}
	}
	if err != nil {
		run.createMu.Lock()
		run.createErr = cmp.Or(run.createErr, err)
		run.createMu.Unlock()
		return false
	}
	base := time.Now().Add(time.Duration(rand.Int64N(int64(run.period))))
	heap.Push(h, dueSession{due: base, base: base, i: i})
	return true
}

// keepalive sends the keepalive at the top of h (with --batch, those
// due within the linger) and reschedules it: a period later on success,
// at once on a failure worth retrying (the next attempt goes wherever the
// leader is by then), never for a session that is gone. It returns the
// pause the worker takes before its next request: none after an answer,
// else the backoff (or the node's Retry-After) with jitter, so that a
// worker whose node is down or shedding waits instead of failing every
// one of its due sessions in turn.
func (run *kaRun) keepalive(h *dueHeap, backoff *time.Duration) time.Duration {
	if run.cfg.batch {
		return run.keepaliveBatch(h, backoff)
	}
	s := (*h)[0]
	sentAt := time.Now()
	code, retryAfter, err := keepaliveOnce(run.hc, run.target(s.i)+"/v1/sessions/"+run.ids[s.i]+"/keepalive")
	took := time.Since(sentAt)
	run.counted(1)
	heap.Pop(h)
	switch {
	case err == nil:
		run.kept(h, s, sentAt, took)
		*backoff = 0
		return 0
	case code == http.StatusNotFound:
		run.countFailure()
		run.gone.Add(1)
		return 0
	default:
		run.countFailure()
		heap.Push(h, s)
		return run.pause(backoff, retryAfter)
	}
}

// keepaliveBatch sends every keepalive of h due within the linger (up
// to the server's 1000) in one request and reschedules each.
func (run *kaRun) keepaliveBatch(h *dueHeap, backoff *time.Duration) time.Duration {
	horizon := time.Now().Add(min(run.period/10, 500*time.Millisecond))
	var batch []dueSession
	for len(*h) > 0 && len(batch) < maxKeepAliveBatch && !(*h)[0].due.After(horizon) {
		batch = append(batch, heap.Pop(h).(dueSession))
	}
	ids := make([]string, len(batch))
	for j, s := range batch {
		ids[j] = run.ids[s.i]
	}
	sentAt := time.Now()
	kept, retryAfter, err := keepaliveManyOnce(run.hc, run.target(batch[0].i)+"/v1/sessions/keepalive", ids)
	took := time.Since(sentAt)
	run.counted(len(batch))
	if err != nil {
		for _, s := range batch {
			run.countFailure()
			heap.Push(h, s)
		}
		return run.pause(backoff, retryAfter)
	}
	for j, s := range batch {
		if kept[j].Error != nil {
			run.countFailure()
			run.gone.Add(1)
			continue
		}
		run.kept(h, s, sentAt, took)
	}
	*backoff = 0
	return 0
}

// maxKeepAliveBatch is the most sessions one batched keepalive names.
const maxKeepAliveBatch = 1000

// counted counts one request carrying n keepalives.
func (run *kaRun) counted(n int) {
	if run.measuring.Load() {
		run.sent.Add(int64(n))
		run.requests.Add(1)
	}
}

// kept notes session s's keepalive sent at sentAt, answered after took,
// and pushes it back on h a period later.
func (run *kaRun) kept(h *dueHeap, s dueSession, sentAt time.Time, took time.Duration) {
	run.keptAt[s.i] = sentAt.UnixNano()
	if run.measuring.Load() {
		run.latMu.Lock()
		run.lat = append(run.lat, took)
		run.latMu.Unlock()
	}
	if killedAt := run.killedAt.Load(); killedAt != 0 && sentAt.UnixNano() > killedAt && !run.rekeptOne[s.i] {
		run.rekeptOne[s.i] = true
		if run.rekept.Add(1) == int64(run.cfg.n) {
			run.rekeptAt.Store(time.Now().UnixNano())
		}
	}
	s.base = s.base.Add(run.period)
	s.due = s.base.Add(jitter(run.period / 20))
	heap.Push(h, s)
}

// pause is a worker's wait after a failed request: the node's
// Retry-After, else a backoff doubling from 20ms to at most a second (a
// quarter period), with jitter.
func (run *kaRun) pause(backoff *time.Duration, retryAfter time.Duration) time.Duration {
	*backoff = min(max(2**backoff, 20*time.Millisecond), time.Second, run.period/4)
	wait := cmp.Or(retryAfter, *backoff)
	return wait/2 + time.Duration(rand.Int64N(int64(wait)))
}

// countFailure counts a failed keepalive.
func (run *kaRun) countFailure() {
	if run.measuring.Load() {
		run.failed.Add(1)
	}
	if run.killedAt.Load() != 0 {
		run.failedPostKill.Add(1)
	}
}

// jitter is a random duration in [-d, d).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(2*d))) - d
}

// keepaliveOnce posts one keepalive. It returns the status (0 when no
// answer came), the answer's Retry-After, and an error unless it is 2xx.
func keepaliveOnce(hc *http.Client, url string) (int, time.Duration, error) {
	resp, err := hc.Post(url, "application/json", nil)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, 0, nil
	}
	return resp.StatusCode, retryAfterOf(resp), fmt.Errorf("POST %s: %s: %s", url, resp.Status, data)
}

// keepaliveManyOnce posts one batched keepalive. It returns each
// session's part of the answer, the answer's Retry-After, and an error
// unless it is 2xx.
func keepaliveManyOnce(hc *http.Client, url string, ids []string) ([]wire.KeptSession, time.Duration, error) {
	body, err := json.Marshal(wire.KeepAlivesRequest{Sessions: ids})
	if err != nil {
		return nil, 0, err
	}
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return nil, retryAfterOf(resp), fmt.Errorf("POST %s: %s: %s", url, resp.Status, data)
	}
	var out wire.KeepAlivesResponse
	if err := json.Unmarshal(data, &out); err != nil || len(out.Sessions) != len(ids) {
		return nil, 0, fmt.Errorf("POST %s: %d answers for %d sessions (%v)", url, len(out.Sessions), len(ids), err)
	}
	return out.Sessions, 0, nil
}

// retryAfterOf is an answer's Retry-After in seconds; 0 when it has none.
func retryAfterOf(resp *http.Response) time.Duration {
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// followLeader moves the keepalives to the leader whenever every live
// node names a new one, until stop.
func (run *kaRun) followLeader(live *[]string) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-run.stop:
			return
		case <-tick.C:
		}
		run.liveMu.Lock()
		nodes := slices.Clone(*live)
		run.liveMu.Unlock()
		if leader, err := agreedLeader(run.hc, run.a, nodes); err == nil && leader != (*run.targets.Load())[0] {
			run.targets.Store(&[]string{leader})
		}
	}
}

// failover kills the leader every node names, then waits (30 s at most)
// until every survivor names a new one and sends the keepalives there.
func (run *kaRun) failover(nodes []string, live *[]string) (*failoverResult, error) {
	leader, err := waitAgreedLeader(run.a, nodes, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	survivors := slices.DeleteFunc(slices.Clone(nodes), func(s string) bool { return s == leader })
	run.liveMu.Lock()
	*live = survivors
	run.liveMu.Unlock()
	start := time.Now()
	run.killedAt.Store(start.UnixNano())
	if err := run.cfg.kill(leader); err != nil {
		return nil, fmt.Errorf("failover: kill %s: %w", leader, err)
	}
	if run.cfg.spread {
		run.targets.Store(&survivors)
	}
	next, err := waitAgreedLeader(run.a, survivors, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("failover: after killing %s: %w", leader, err)
	}
	if !run.cfg.spread {
		run.targets.Store(&[]string{next})
	}
	f := &failoverResult{killed: leader, leader: next, elected: time.Since(start)}
	if run.cfg.resume != nil {
		return f, run.rejoin(f, nodes, live)
	}
	return f, nil
}

// rejoin resumes the paused leader cfg.pausedFor after the others elected a
// new one, and waits (30 s at most) until every node names the same
// leader again: the old one must learn that it no longer leads.
func (run *kaRun) rejoin(f *failoverResult, nodes []string, live *[]string) error {
	f.paused = true
	time.Sleep(run.cfg.pausedFor)
	if err := run.cfg.resume(f.killed); err != nil {
		return fmt.Errorf("failover: resume %s: %w", f.killed, err)
	}
	resumed := time.Now()
	leader, err := waitAgreedLeader(run.a, nodes, 30*time.Second)
	if err != nil {
		return fmt.Errorf("failover: after resuming %s: %w", f.killed, err)
	}
	f.rejoined, f.leader = time.Since(resumed), leader
	run.liveMu.Lock()
	*live = slices.Clone(nodes)
	run.liveMu.Unlock()
	if run.cfg.spread {
		run.targets.Store(&nodes)
	}
	return nil
}

// agreedLeader returns the leader that every one of nodes names, if they
// all answer and agree on one of them.
func agreedLeader(hc *http.Client, a api, nodes []string) (string, error) {
	var leader string
	for _, n := range nodes {
		l, err := leaderOf(hc, a.url(n))
		if err != nil {
			return "", err
		}
		if leader != "" && l != leader {
			return "", fmt.Errorf("%s names %s, another node %s", n, l, leader)
		}
		leader = l
	}
	if !slices.Contains(nodes, leader) {
		return "", fmt.Errorf("the nodes name %s, which is not one of them", leader)
	}
	return leader, nil
}

// waitAgreedLeader waits up to timeout for every one of nodes to name the
// same leader among them.
func waitAgreedLeader(a api, nodes []string, timeout time.Duration) (string, error) {
	hc := a.client(1, 2*time.Second)
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		leader, err := agreedLeader(hc, a, nodes)
		if err == nil {
			return leader, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no leader every node names within %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lost counts the sessions of this run that are not in the leader's
// session list (a linearizable read, page by page).
func (run *kaRun) lost() (int, error) {
	live := map[string]bool{}
	after := ""
	base := run.target(0)
	for pages := 0; ; pages++ {
		if pages > run.cfg.n/1000+10 {
			return 0, errors.New("list sessions: more pages than sessions")
		}
		ids, next, err := listSessionPage(run.hc, base, after)
		if err != nil {
			return 0, fmt.Errorf("list sessions: %w", err)
		}
		for _, id := range ids {
			live[id] = true
		}
		if next == "" {
			break
		}
		after = next
	}
	lost := 0
	for _, id := range run.ids {
		if !live[id] {
			lost++
		}
	}
	return lost, nil
}

// listSessionPage reads one page (the largest) of GET /v1/sessions.
func listSessionPage(hc *http.Client, base, after string) ([]string, string, error) {
	url := base + "/v1/sessions?limit=10000"
	if after != "" {
		url += "&after=" + after
	}
	resp, err := hc.Get(url)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return nil, "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, data)
	}
	var page []struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, "", fmt.Errorf("GET %s: %w", url, err)
	}
	ids := make([]string, len(page))
	for i, s := range page {
		ids[i] = s.ID
	}
	return ids, resp.Header.Get("X-Next-After"), nil
}

// deleteAll closes every session that was opened.
func (run *kaRun) deleteAll() {
	_ = parallel(run.cfg.n, run.cfg.conns, func(i int) error {
		if run.ids[i] != "" {
			deleteSession(run.hc, run.target(i), run.ids[i])
		}
		return nil
	})
}

// nodeMemories reads each node's resident memory and Go heap in use; a
// node that does not answer is left out.
func nodeMemories(hc *http.Client, a api, nodes []string) map[string]nodeMemory {
	out := map[string]nodeMemory{}
	for _, node := range nodes {
		if m, err := metrics(hc, a, node, "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes"); err == nil {
			out[node] = nodeMemory{rss: m["process_resident_memory_bytes"], heap: m["go_memstats_heap_inuse_bytes"]}
		}
	}
	return out
}

// heapInUse reads each node's Go heap in use.
func heapInUse(hc *http.Client, a api, nodes []string) map[string]float64 {
	out := map[string]float64{}
	for node, m := range nodeMemories(hc, a, nodes) {
		out[node] = m.heap
	}
	return out
}

// parallel runs fn(0..n-1) with at most width at once and returns the
// first error.
func parallel(n, width int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		slots = make(chan struct{}, width)
	)
	for i := range n {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := fn(i); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// cpuSeconds reads process_cpu_seconds_total from each node's /metrics.
func cpuSeconds(hc *http.Client, a api, nodes []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, node := range nodes {
		m, err := metrics(hc, a, node, "process_cpu_seconds_total")
		if err != nil {
			return nil, err
		}
		out[node] = m["process_cpu_seconds_total"]
	}
	return out, nil
}
