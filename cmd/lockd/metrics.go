package main

import (
	"fmt"

	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// raftMetrics routes hashicorp/raft's own metrics (go-metrics: commit and
// apply times, leader changes, replication, snapshots, FSM apply) into the
// node's Prometheus registry through raftSink, named lockd_raft_* (e.g.
// lockd_raft_commitTime, lockd_raft_state_leader). go-metrics is
// process-global, as raft uses it: one node per process.
func raftMetrics(reg prometheus.Registerer) error {
	// Leader changes are counted from the start (0), not only once one
	// happened.
	var counters []raftCounter
	for _, state := range []string{"leader", "candidate", "follower"} {
		counters = append(counters, raftCounter{key: []string{"raft", "state", state},
			help: "Times this node became the raft " + state + " (raft.state." + state + ")."})
	}
	sink := newRaftSink(counters)
	if err := reg.Register(sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	// No service name: go-metrics would prepend it to every key, a new
	// slice per report; the sink names the metrics lockd_*.
	cfg := metrics.DefaultConfig("")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics, cfg.EnableServiceLabel = false, false, false
	if _, err := metrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}
