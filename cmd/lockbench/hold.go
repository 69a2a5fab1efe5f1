package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// holdsPerSession keeps --hold under the default --max-holds-per-session
// (10,000); namesPerAcquire is the most names one acquire may take.
const (
	holdsPerSession = 5000
	namesPerAcquire = 64
)

// holdResult is what --hold measured: how fast the locks were taken and
// each node's memory with all of them held.
type holdResult struct {
	locks, errors int
	took          time.Duration
	memory        map[string]nodeMemory
}

type nodeMemory struct{ rss, heap float64 } // bytes: resident, Go heap in use

// hold takes n locks (64 names per acquire, in sessions of 5,000 holds
// spread over targets) with conns acquires in flight, and reads each
// node's memory once they are all held. The sessions stay open (TTL 1h)
// so that a restart measured next has the locks to load.
func hold(a api, targets, nodes []string, n, conns int) (*holdResult, error) {
	hc := a.client(conns, 60*time.Second)
	defer hc.CloseIdleConnections()
	sessions := make([]string, (n+holdsPerSession-1)/holdsPerSession)
	if err := parallel(len(sessions), conns, func(i int) error {
		var err error
		sessions[i], err = createSessionTTL(hc, a.url(targets[i%len(targets)]), time.Hour)
		return err
	}); err != nil {
		return nil, fmt.Errorf("open sessions: %w", err)
	}
	start := time.Now()
	var failed atomic.Int64
	perSession := (holdsPerSession + namesPerAcquire - 1) / namesPerAcquire // acquires per session
	err := parallel(len(sessions)*perSession, conns, func(b int) error {
		s := b / perSession
		first := s*holdsPerSession + b%perSession*namesPerAcquire
		last := min(first+namesPerAcquire, (s+1)*holdsPerSession, n) // a batch never crosses into the next session
		if first >= last {
			return nil
		}
		locks := make([]map[string]any, 0, last-first)
		for i := first; i < last; i++ {
			locks = append(locks, map[string]any{"name": fmt.Sprintf("hold/s%d/n%d", s, i), "mode": "write"})
		}
		var out struct {
			Status string `json:"status"`
		}
		err := post(hc, a.url(targets[s%len(targets)])+"/v1/acquire", map[string]any{"session": sessions[s], "locks": locks}, &out)
		if err != nil || out.Status != "granted" {
			failed.Add(int64(len(locks)))
		}
		return nil
	})
	r := &holdResult{locks: n - int(failed.Load()), errors: int(failed.Load()), took: time.Since(start), memory: map[string]nodeMemory{}}
	if err != nil {
		return nil, err
	}
	for _, node := range nodes {
		m, err := metrics(hc, a, node, "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes")
		if err != nil {
			return nil, err
		}
		r.memory[node] = nodeMemory{rss: m["process_resident_memory_bytes"], heap: m["go_memstats_heap_inuse_bytes"]}
	}
	return r, nil
}

// metrics reads the named unlabelled samples from node's /metrics.
func metrics(hc *http.Client, a api, node string, names ...string) (map[string]float64, error) {
	resp, err := hc.Get(a.url(node) + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		if out[name], err = strconv.ParseFloat(strings.TrimSpace(value), 64); err != nil {
			return nil, fmt.Errorf("%s/metrics: %s: %w", node, name, err)
		}
	}
	for _, name := range names {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("%s/metrics: no %s (%s)", node, name, resp.Status)
		}
	}
	return out, sc.Err()
}

// appliedIndex reads a node's applied index from /v1/status.
func appliedIndex(hc *http.Client, a api, node string) (uint64, error) {
	resp, err := hc.Get(a.url(node) + "/v1/status")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		AppliedIndex uint64 `json:"applied_index"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("%s/v1/status: %w", node, err)
	}
	return st.AppliedIndex, nil
}
