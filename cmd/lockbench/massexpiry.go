package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// --mass-expiry N: N sessions each hold a lock that a live session waits
// for, and their clients all stop at once. It measures what the storm of
// expiries does to everyone else (the acquire latency of live clients,
// before and during it), whether every lock reaches its waiter, how late
// the expiries come, and how many log entries they take.

const (
	// massGroup is how many of the dying sessions' names one waiter asks
	// for (an acquire names at most 64): one pending request per group,
	// so that the waiters stay within a node's --max-waits.
	massGroup = 64
	// massWait is the waiters' wait; --spawn starts the nodes with a
	// --max-wait that allows it.
	massWait = 10 * time.Minute
	// massProbeTTL is the probes' session TTL; they keep their sessions
	// alive every third of it.
	massProbeTTL = 30 * time.Second
)

// massConfig is one --mass-expiry run.
type massConfig struct {
	n, conns, probes int
	ttl              time.Duration // the dying sessions' TTL
	warmup, quiet    time.Duration // before the quiet window; the quiet window
}

// massResult is what --mass-expiry measured.
type massResult struct {
	setup              time.Duration
	quiet, storm       []time.Duration // the probes' acquire latencies in each window, sorted
	probeErrors        int
	stormFrom, stormTo time.Duration // the storm window, from the stop
	granted, waiters   int
	waitErr            error         // the first waiter that was not granted
	firstGrant         time.Duration // from the stop
	lastGrant          time.Duration
	latest             time.Duration // most any group's grant came after its last session's deadline
	expired, entries   float64       // sessions expired and the entries that did it (-1: not exported), on the leader
	leaderCPU          float64       // % of one core from the stop to the last grant
}

// massWaiter is one waiter: a session asking for a group of the dying
// sessions' names.
type massWaiter struct {
	session, request string
	names            []int // the dying sessions whose names it waits for
	grantedAt        time.Time
	err              error
}

// massExpiry runs the --mass-expiry workload against leader: the probes
// measure a quiet window first, on a cluster with nothing else to do;
// then the dying sessions and their waiters are set up, and their clients
// stop.
func massExpiry(a api, leader string, cfg massConfig) (*massResult, error) {
	r := &massResult{}
	base := a.url(leader)
	hc := a.client(cfg.conns+cfg.n/massGroup+cfg.probes+4, massWait+time.Minute)
	defer hc.CloseIdleConnections()
	pr := startProbes(hc, base, cfg.probes)
	defer pr.stop()
	time.Sleep(cfg.warmup)
	quietFrom := time.Now()
	time.Sleep(cfg.quiet)
	r.quiet, r.probeErrors = pr.window(quietFrom, time.Now())

	// The probes rest while the storm is set up: they would take the
	// leader's CPU from the keepalives of the sessions being opened.
	pr.paused.Store(true)
	start := time.Now()
	// Kept alive batched, as the Go and Python clients keep theirs: one
	// request each would take the leader's CPU from their opening.
	dying := newKaRun(a, []string{leader}, keepaliveConfig{n: cfg.n, conns: cfg.conns, ttl: cfg.ttl, batch: true,
		hold: func(hc *http.Client, base string, i int, id string) error {
			return acquireOne(hc, base, id, massName(i), 0)
		}})
	defer dying.hc.CloseIdleConnections()
	stopDying, err := dying.open()
	defer dying.deleteAll()
	defer stopDying()
	if err != nil {
		return nil, err
	}
	waiters, waitDone, err := queueWaiters(hc, base, cfg.n)
	defer closeSessions(hc, base, waiters)
	if err != nil {
		return nil, err
	}
	r.setup = time.Since(start)
	pr.paused.Store(false)

	before, err := metrics(hc, a, leader, "lockd_session_expiries_total", "process_cpu_seconds_total")
	if err != nil {
		return nil, err
	}
	entriesBefore, entriesErr := metrics(hc, a, leader, "lockd_session_expiry_entries_total") // a build before batches has none
	stoppedAt := time.Now()
	stopDying() // the clients of every dying session stop at once
	// A session's last keepalive was at most a period (and its jitter)
	// before the stop: none can expire before this.
	r.stormFrom = cfg.ttl - cfg.ttl/3 - cfg.ttl/60
	waitAll(waitDone, cfg.ttl+2*time.Minute)
	after, err := metrics(hc, a, leader, "lockd_session_expiries_total", "process_cpu_seconds_total")
	if err != nil {
		return nil, err
	}
	r.entries = -1
	if entriesAfter, err := metrics(hc, a, leader, "lockd_session_expiry_entries_total"); err == nil && entriesErr == nil {
		r.entries = entriesAfter["lockd_session_expiry_entries_total"] - entriesBefore["lockd_session_expiry_entries_total"]
	}
	pr.stop()
	r.waiters = len(waiters)
	r.grants(waiters, dying, stoppedAt, cfg.ttl)
	r.stormTo = max(r.lastGrant, r.stormFrom+time.Second)
	var stormErrors int
	r.storm, stormErrors = pr.window(stoppedAt.Add(r.stormFrom), stoppedAt.Add(r.stormTo))
	r.probeErrors += stormErrors
	r.expired = after["lockd_session_expiries_total"] - before["lockd_session_expiries_total"]
	r.leaderCPU = 100 * (after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]) /
		time.Since(stoppedAt).Seconds()
	return r, nil
}

func massName(i int) string { return fmt.Sprintf("massexp/%d", i) }

// grants reads the waiters' outcomes: when each was granted, from the
// stop, and by how much its grant came after the latest deadline of its
// group's sessions (their last successful keepalive's sending plus the
// TTL: an upper bound on how late the expiry was).
func (r *massResult) grants(waiters []*massWaiter, dying *kaRun, stoppedAt time.Time, ttl time.Duration) {
	r.firstGrant = -1
	for _, w := range waiters {
		if w.err != nil {
			r.waitErr = cmp.Or(r.waitErr, w.err)
			continue
		}
		r.granted++
		at := w.grantedAt.Sub(stoppedAt)
		if r.firstGrant < 0 || at < r.firstGrant {
			r.firstGrant = at
		}
		r.lastGrant = max(r.lastGrant, at)
		var deadline int64
		for _, i := range w.names {
			deadline = max(deadline, dying.keptAt[i]+int64(ttl))
		}
		r.latest = max(r.latest, w.grantedAt.Sub(time.Unix(0, deadline)))
	}
}

// queueWaiters opens a session per group of massGroup dying names and
// has it ask for them all, waiting; it returns once every request is
// queued. waitDone is closed once every waiter's acquire has answered.
func queueWaiters(hc *http.Client, base string, n int) (waiters []*massWaiter, waitDone chan struct{}, err error) {
	for first := 0; first < n; first += massGroup {
		w := &massWaiter{request: fmt.Sprintf("massexp-waiter-%d", first/massGroup)}
		for i := first; i < min(first+massGroup, n); i++ {
			w.names = append(w.names, i)
		}
		waiters = append(waiters, w)
	}
	waitDone = make(chan struct{})
	if err := parallel(len(waiters), 32, func(j int) error {
		var err error
		waiters[j].session, err = createSessionTTL(hc, base, massWait+time.Minute)
		return err
	}); err != nil {
		close(waitDone)
		return waiters, waitDone, fmt.Errorf("open the waiters' sessions: %w", err)
	}
	var wg sync.WaitGroup
	for _, w := range waiters {
		wg.Add(1)
		go func() { defer wg.Done(); w.wait(hc, base) }()
	}
	go func() { wg.Wait(); close(waitDone) }()
	err = parallel(len(waiters), 32, func(j int) error { return awaitQueued(hc, base, waiters[j]) })
	return waiters, waitDone, err
}

// wait asks for the waiter's names and records when they were granted.
func (w *massWaiter) wait(hc *http.Client, base string) {
	locks := make([]map[string]any, len(w.names))
	for k, i := range w.names {
		locks[k] = map[string]any{"name": massName(i), "mode": "write"}
	}
	var out struct {
		Status string `json:"status"`
	}
	err := post(hc, base+"/v1/acquire", map[string]any{"session": w.session, "request_id": w.request,
		"locks": locks, "wait": massWait.String()}, &out)
	switch {
	case err != nil:
		w.err = fmt.Errorf("waiter %s: %w (a node's --max-wait under %v ends the wait)", w.request, err, massWait)
	case out.Status != "granted":
		w.err = fmt.Errorf("waiter %s: %s", w.request, out.Status)
	default:
		w.grantedAt = time.Now()
	}
}

// awaitQueued returns once the waiter's request is in the table, pending
// (its acquire is still waiting for the answer).
func awaitQueued(hc *http.Client, base string, w *massWaiter) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var info struct {
			Status string `json:"status"`
		}
		err := get(hc, base+"/v1/requests/"+w.request+"?session="+w.session, &info)
		switch {
		case err == nil && info.Status == "pending":
			return nil
		case err == nil:
			return fmt.Errorf("waiter %s: %s before any session expired", w.request, info.Status)
		case time.Now().After(deadline):
			return fmt.Errorf("waiter %s not queued within a minute: %w", w.request, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAll waits for done, at most d.
func waitAll(done chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// closeSessions closes the waiters' sessions (their waits end with them).
func closeSessions(hc *http.Client, base string, waiters []*massWaiter) {
	_ = parallel(len(waiters), 32, func(j int) error {
		if waiters[j].session != "" {
			deleteSession(hc, base, waiters[j].session)
		}
		return nil
	})
}

// probes are live clients, each acquiring and releasing a name of its
// own, recording each acquire's start and latency.
type probes struct {
	paused   atomic.Bool // probes only keep their sessions alive
	stopOnce sync.Once
	done     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	samples  []probeSample
}

type probeSample struct {
	at  time.Time
	lat time.Duration
	err bool
}

// startProbes starts n probes against base.
func startProbes(hc *http.Client, base string, n int) *probes {
	p := &probes{done: make(chan struct{})}
	for c := range n {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.run(hc, base, c) }()
	}
	return p
}

// run is one probe: it keeps its session alive every third of its TTL
// between its pairs.
func (p *probes) run(hc *http.Client, base string, c int) {
	sid, err := createSessionTTL(hc, base, massProbeTTL)
	if err != nil {
		p.record(probeSample{at: time.Now(), err: true})
		return
	}
	defer deleteSession(hc, base, sid)
	name := fmt.Sprintf("massprobe/c%d", c)
	kept := time.Now()
	for {
		select {
		case <-p.done:
			return
		default:
		}
		if time.Since(kept) > massProbeTTL/3 {
			if _, _, err := keepaliveOnce(hc, base+"/v1/sessions/"+sid+"/keepalive"); err == nil {
				kept = time.Now()
			}
		}
		if p.paused.Load() {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		t0 := time.Now()
		err := acquireOne(hc, base, sid, name, 10*time.Second)
		p.record(probeSample{at: t0, lat: time.Since(t0), err: err != nil})
		if err == nil {
			_ = release(hc, base, sid, name)
		}
	}
}

func (p *probes) record(s probeSample) {
	p.mu.Lock()
	p.samples = append(p.samples, s)
	p.mu.Unlock()
}

// stop ends the probes and waits for them.
func (p *probes) stop() {
	p.stopOnce.Do(func() { close(p.done); p.wg.Wait() })
}

// window returns the sorted latencies of the acquires started in
// [from, to) that succeeded, and how many failed.
func (p *probes) window(from, to time.Time) (lat []time.Duration, errs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.samples {
		switch {
		case s.at.Before(from) || !s.at.Before(to):
		case s.err:
			errs++
		default:
			lat = append(lat, s.lat)
		}
	}
	slices.Sort(lat)
	return lat, errs
}

// get reads url's JSON answer into out; anything but 200 is an error.
func get(hc *http.Client, url string, out any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
