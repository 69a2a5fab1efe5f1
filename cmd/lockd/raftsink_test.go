package main

import (
	"strings"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	metricsprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// reportLikeRaft makes the reports hashicorp/raft makes around one commit
// on the leader (raft.go, replication.go, fsm.go): timers, a counter, a
// gauge, a labelled timer and a key-value event.
func reportLikeRaft(m *metrics.Metrics, start time.Time) {
	m.MeasureSince([]string{"raft", "commitTime"}, start)
	m.MeasureSince([]string{"raft", "leader", "dispatchLog"}, start)
	m.MeasureSince([]string{"raft", "rpc", "appendEntries", "storeLogs"}, start)
	m.MeasureSince([]string{"raft", "fsm", "apply"}, start)
	m.AddSample([]string{"raft", "leader", "dispatchNumLogs"}, 1)
	m.IncrCounter([]string{"raft", "apply"}, 1)
	m.SetGauge([]string{"raft", "commitNumLogs"}, 1)
	m.MeasureSinceWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, start, []metrics.Label{{Name: "peer_id", Value: "n2"}})
	m.EmitKey([]string{"raft", "event"}, 1)
}

// newRaftMetrics is go-metrics as raftMetrics sets it up, with sink, not
// made global.
func newRaftMetrics(t testing.TB, sink metrics.MetricSink) *metrics.Metrics {
	cfg := metrics.DefaultConfig("")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics, cfg.EnableServiceLabel = false, false, false
	m, err := metrics.New(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// raft's reports reach /metrics under go-metrics' Prometheus sink's names
// and types, with their labels, and the leader counter exists at 0 first.
func TestRaftSink(t *testing.T) {
	sink := newRaftSink([]raftCounter{{key: []string{"raft", "state", "leader"}, help: "Times this node became the raft leader."}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(sink)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP lockd_raft_state_leader Times this node became the raft leader.
# TYPE lockd_raft_state_leader counter
lockd_raft_state_leader 0
`)); err != nil {
		t.Fatal(err)
	}
	m := newRaftMetrics(t, sink)
	for range 3 {
		reportLikeRaft(m, time.Now())
	}
	m.IncrCounter([]string{"raft", "state", "leader"}, 1)
	m.IncrCounter([]string{"raft", "apply"}, -1) // a counter never goes down
	tests := []struct {
		name, want string
	}{
		{"lockd_raft_state_leader", "lockd_raft_state_leader 1\n"},
		{"lockd_raft_apply", "lockd_raft_apply 3\n"},
		{"lockd_raft_commitNumLogs", "lockd_raft_commitNumLogs 1\n"},
		{"lockd_raft_commitTime_count", ""},
		{"lockd_raft_leader_dispatchNumLogs_sum", "lockd_raft_leader_dispatchNumLogs_sum 3\n"},
		{"lockd_raft_replication_appendEntries_rpc_count", `lockd_raft_replication_appendEntries_rpc_count{peer_id="n2"} 3` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := gathered(t, reg, tt.name)
			if tt.want == "" && got == "" || tt.want != "" && got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 9 {
		t.Fatalf("%d series (%v), want 9: one each, none for the event", n, err)
	}
}

// gathered returns the lines of reg's text exposition that name the
// metric name (a summary's _sum and _count included).
func gathered(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(exposition(t, reg), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// BenchmarkRaftMetrics makes the reports raft makes around one commit,
// into go-metrics' Prometheus sink and into raftSink, with -benchmem the
// allocations they cost on raft's hot path.
func BenchmarkRaftMetrics(b *testing.B) {
	sinks := map[string]func() metrics.MetricSink{
		"go-metrics-prometheus": func() metrics.MetricSink {
			s, err := metricsprom.NewPrometheusSinkFrom(metricsprom.PrometheusOpts{Registerer: prometheus.NewRegistry(), Name: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"raftSink": func() metrics.MetricSink { return newRaftSink(nil) },
	}
	for _, name := range []string{"go-metrics-prometheus", "raftSink"} {
		b.Run(name, func(b *testing.B) {
			m := newRaftMetrics(b, sinks[name]())
			start := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				reportLikeRaft(m, start)
			}
		})
	}
}

// exposition is reg's metrics in the Prometheus text format.
func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
