package main

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// raftSink is the go-metrics sink that hashicorp/raft's metrics go to, a
// prometheus.Collector. raft reports a dozen of them per commit on its
// hot path; go-metrics' own Prometheus sink builds the name, its lookup
// key and a fresh copy of the summary on each, and this sink finds the
// series by a hash of the key and its labels and updates it in place, so
// that a report that finds its series allocates nothing. The names,
// types, help and summary objectives are those of go-metrics' Prometheus
// sink (lockd_raft_commitTime, ...); series never expire.
type raftSink struct {
	seed maphash.Seed
	help map[string]string // by name, for the counters given at the start

	mu     sync.RWMutex
	series map[uint64][]*raftSeries // by hash of kind, key and labels
}

// seriesKind is what a series is: a gauge, a counter or a summary.
type seriesKind byte

const (
	gaugeKind seriesKind = iota + 1
	counterKind
	summaryKind
)

// raftSeries is one metric and label set, as go-metrics reported it.
type raftSeries struct {
	kind   seriesKind
	key    []string
	labels []metrics.Label
	metric prometheus.Metric // a Gauge, Counter or Summary by kind
}

// summaryObjectives are go-metrics' Prometheus sink's.
var summaryObjectives = map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}

// raftCounter is a counter that exists, at 0, before raft first reports
// it.
type raftCounter struct {
	key  []string // as raft reports it: {"raft", "state", "leader"}
	help string
}

// newRaftSink returns a sink with counters.
func newRaftSink(counters []raftCounter) *raftSink {
	s := &raftSink{seed: maphash.MakeSeed(), help: map[string]string{}, series: map[uint64][]*raftSeries{}}
	for _, c := range counters {
		s.help[raftMetricName(c.key)] = c.help
		s.get(counterKind, c.key, nil)
	}
	return s
}

// raftMetricName is the Prometheus name of a go-metrics key: lockd_, then
// its parts joined by _, with the characters Prometheus does not take
// replaced as go-metrics' Prometheus sink replaces them.
func raftMetricName(key []string) string {
	return "lockd_" + strings.NewReplacer(" ", "_", ".", "_", "=", "_", "-", "_", "/", "_").Replace(strings.Join(key, "_"))
}

// get returns the series of kind, key and labels, made on first use.
func (s *raftSink) get(kind seriesKind, key []string, labels []metrics.Label) *raftSeries {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteByte(byte(kind))
	for _, k := range key {
		h.WriteString(k)
		h.WriteByte(0)
	}
	for _, l := range labels {
		h.WriteString(l.Name)
		h.WriteByte(0)
		h.WriteString(l.Value)
		h.WriteByte(0)
	}
	sum := h.Sum64()
	s.mu.RLock()
	se := s.find(sum, kind, key, labels)
	s.mu.RUnlock()
	if se != nil {
		return se
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if se := s.find(sum, kind, key, labels); se != nil {
		return se
	}
	se = &raftSeries{kind: kind, key: slices.Clone(key), labels: slices.Clone(labels), metric: s.newMetric(kind, key, labels)}
	s.series[sum] = append(s.series[sum], se)
	return se
}

// find returns the series of kind, key and labels among those of hash
// sum, or nil. The caller holds mu.
func (s *raftSink) find(sum uint64, kind seriesKind, key []string, labels []metrics.Label) *raftSeries {
	for _, se := range s.series[sum] {
		if se.kind == kind && slices.Equal(se.key, key) && slices.Equal(se.labels, labels) {
			return se
		}
	}
	return nil
}

// newMetric makes the Prometheus metric of a new series.
func (s *raftSink) newMetric(kind seriesKind, key []string, labels []metrics.Label) prometheus.Metric {
	name := raftMetricName(key)
	help := name
	if h, ok := s.help[name]; ok {
		help = h
	}
	var constLabels prometheus.Labels
	if len(labels) > 0 {
		constLabels = prometheus.Labels{}
		for _, l := range labels {
			constLabels[l.Name] = l.Value
		}
	}
	switch kind {
	case gaugeKind:
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: constLabels})
	case counterKind:
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: constLabels})
	}
	return prometheus.NewSummary(prometheus.SummaryOpts{Name: name, Help: help, ConstLabels: constLabels,
		MaxAge: 10 * time.Second, Objectives: summaryObjectives})
}

// SetGauge implements metrics.MetricSink.
func (s *raftSink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

// SetGaugeWithLabels implements metrics.MetricSink.
func (s *raftSink) SetGaugeWithLabels(key []string, val float32, labels []metrics.Label) {
	s.get(gaugeKind, key, labels).metric.(prometheus.Gauge).Set(float64(val))
}

// EmitKey implements metrics.MetricSink: a key-value event, which
// Prometheus has no type for (go-metrics' Prometheus sink drops it too).
func (s *raftSink) EmitKey([]string, float32) {}

// IncrCounter implements metrics.MetricSink.
func (s *raftSink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

// IncrCounterWithLabels implements metrics.MetricSink.
func (s *raftSink) IncrCounterWithLabels(key []string, val float32, labels []metrics.Label) {
	if val >= 0 { // a Prometheus counter only goes up
		s.get(counterKind, key, labels).metric.(prometheus.Counter).Add(float64(val))
	}
}

// AddSample implements metrics.MetricSink.
func (s *raftSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels implements metrics.MetricSink.
func (s *raftSink) AddSampleWithLabels(key []string, val float32, labels []metrics.Label) {
	s.get(summaryKind, key, labels).metric.(prometheus.Summary).Observe(float64(val))
}

// Describe implements prometheus.Collector: an unchecked collector, its
// series are known only once raft reports them.
func (s *raftSink) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (s *raftSink) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, list := range s.series {
		for _, se := range list {
			ch <- se.metric
		}
	}
}
