package main

import (
	"cmp"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// keepaliveTTL is the TTL of the sessions --keepalive holds; each is kept
// alive every third of it, as the Go client does.
const keepaliveTTL = 15 * time.Second

// keepaliveResult is one --keepalive run: keepalives sent and refused,
// and each node's CPU (from its /metrics) over the measured window.
type keepaliveResult struct {
	sent, errors int64
	elapsed      time.Duration
	cpu          map[string]float64 // node address -> % of one core
}

// keepalives opens n sessions of ttl spread over targets and keeps every
// one alive every ttl/3 for warmup+d, with at most conns requests in flight. The CPU
// share is the growth of each node's process_cpu_seconds_total over d.
func keepalives(a api, targets, nodes []string, n, conns int, ttl, warmup, d time.Duration) (*keepaliveResult, error) {
	hc := a.client(conns, 30*time.Second)
	defer hc.CloseIdleConnections()
	ids := make([]string, n)
	if err := parallel(n, conns, func(i int) error {
		var err error
		ids[i], err = createSessionTTL(hc, a.url(targets[i%len(targets)]), ttl)
		return err
	}); err != nil {
		return nil, fmt.Errorf("open sessions: %w", err)
	}
	defer parallel(n, conns, func(i int) error {
		deleteSession(hc, a.url(targets[i%len(targets)]), ids[i])
		return nil
	})

	r := &keepaliveResult{elapsed: d, cpu: map[string]float64{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	period := ttl / 3
	for w := range conns {
		wg.Add(1)
		go func(w int) { // worker w keeps sessions w, w+conns, ... alive, spread over the period
			defer wg.Done()
			mine := (n - w + conns - 1) / conns
			if mine == 0 {
				return
			}
			tick := time.NewTicker(period / time.Duration(mine))
			defer tick.Stop()
			for i := w; ; i += conns {
				if i >= n {
					i = w
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				sent.Add(1)
				if err := post(hc, a.url(targets[i%len(targets)])+"/v1/sessions/"+ids[i]+"/keepalive", map[string]any{}, nil); err != nil {
					failed.Add(1)
				}
			}
		}(w)
	}
	time.Sleep(warmup)
	before, err := cpuSeconds(hc, a, nodes)
	sent0, failed0 := sent.Load(), failed.Load()
	time.Sleep(d)
	after, err2 := cpuSeconds(hc, a, nodes)
	r.sent, r.errors = sent.Load()-sent0, failed.Load()-failed0
	close(stop)
	wg.Wait()
	if err != nil || err2 != nil {
		return nil, fmt.Errorf("read /metrics: %v %v", err, err2)
	}
	for _, node := range nodes {
		r.cpu[node] = 100 * (after[node] - before[node]) / d.Seconds()
	}
	return r, nil
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
