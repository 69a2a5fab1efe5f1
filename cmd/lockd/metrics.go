package main

import (
	"fmt"

	metrics "github.com/hashicorp/go-metrics/compat"
	metricsprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// raftMetrics routes hashicorp/raft's own metrics (go-metrics: commit and
// apply times, leader changes, replication, snapshots, FSM apply) into the
// node's Prometheus registry through go-metrics' Prometheus sink, named
// lockd_raft_* (e.g. lockd_raft_commitTime, lockd_raft_state_leader).
// go-metrics is process-global, as raft uses it: one node per process.
func raftMetrics(reg prometheus.Registerer) error {
	// Leader changes are counted from the start (0), not only once one
	// happened; the sink never expires what it has seen.
	var counters []metricsprom.CounterDefinition
	for _, state := range []string{"leader", "candidate", "follower"} {
		counters = append(counters, metricsprom.CounterDefinition{
			Name: []string{"lockd", "raft", "state", state},
			Help: "Times this node became the raft " + state + " (raft.state." + state + ").",
		})
	}
	sink, err := metricsprom.NewPrometheusSinkFrom(metricsprom.PrometheusOpts{
		Registerer: reg, CounterDefinitions: counters, Name: "lockd_raft_metrics"})
	if err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	cfg := metrics.DefaultConfig("lockd")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics, cfg.EnableServiceLabel = false, false, false
	if _, err := metrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}
