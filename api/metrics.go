package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics is the node's Prometheus registry. Each Server has its own, so
// that several nodes can run in one test process.
type metrics struct {
	reg     *prometheus.Registry
	latency *prometheus.HistogramVec
	waits   *prometheus.HistogramVec
	waiting prometheus.GaugeFunc
}

func newMetrics(s *Server) (*metrics, error) {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockd_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and status code, of requests that do not wait (waits: lockd_http_wait_duration_seconds).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "code"}),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockd_http_wait_duration_seconds",
			Help: "Duration of requests that may wait (acquires with a wait, request long-polls, blocking queries, event streams), by route and status code.",
			// Up to the longest wait: a wait's duration is part of the answer.
			Buckets: []float64{.001, .005, .025, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 600},
		}, []string{"route", "code"}),
		waiting: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lockd_http_waits_in_flight",
			Help: "Acquires, request long-polls and blocking queries waiting on this node.",
		}, func() float64 { return float64(s.locks.Waiting()) }),
	}
	for _, c := range []prometheus.Collector{
		m.latency, m.waits, m.waiting, &stateCollector{s: s}, tableCounters{s: s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Registerer is the node's Prometheus registry, for metrics of other
// layers (raft's own, through cmd/lockd's go-metrics sink).
func (s *Server) Registerer() prometheus.Registerer { return s.metrics.reg }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// instrument records every request's latency under its route pattern
// (bounded label values, unlike raw paths).
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern // set by the ServeMux on this very request
		if route == "" || route == "/" {
			route = "other"
		}
		h := m.latency
		if rec.waited || route == "GET /v1/events" {
			h = m.waits // a long-poll's duration is the client's wait, not the node's latency
		}
		h.WithLabelValues(route, strconv.Itoa(rec.status)).Observe(time.Since(start).Seconds())
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	waited bool // a request that may wait (markWait)
}

// markWait records that the request may wait, for instrument.
func markWait(w http.ResponseWriter) {
	if rec, ok := w.(*statusRecorder); ok {
		rec.waited = true
	}
}

// WriteHeader records the first status written.
func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write marks the (implicit 200) header as written.
func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// stateCollector reads raft's status and the table's counts at scrape
// time, so nothing is updated on the apply path.
type stateCollector struct{ s *Server }

var (
	descRaftState    = prometheus.NewDesc("lockd_raft_state", "1 for this node's raft state.", []string{"state"}, nil)
	descRaftLeader   = prometheus.NewDesc("lockd_raft_has_leader", "1 when this node knows a leader.", nil, nil)
	descRaftTerm     = prometheus.NewDesc("lockd_raft_term", "Current raft term.", nil, nil)
	descCommitIndex  = prometheus.NewDesc("lockd_raft_commit_index", "Raft commit index.", nil, nil)
	descAppliedIndex = prometheus.NewDesc("lockd_raft_applied_index", "Index of the last entry the lock table applied.", nil, nil)
	descSessions     = prometheus.NewDesc("lockd_sessions", "Open sessions.", nil, nil)
	descLocks        = prometheus.NewDesc("lockd_locks", "Names with holders or waiters.", nil, nil)
	descHeld         = prometheus.NewDesc("lockd_held_locks", "Holds (one per session and name).", nil, nil)
	descWaiters      = prometheus.NewDesc("lockd_waiters", "Queued waiters (one per request and name).", nil, nil)
	descRequests     = prometheus.NewDesc("lockd_requests", "Requests pending or remembered for retries.", nil, nil)
	descDigestChecks = prometheus.NewDesc("lockd_digest_checks_total",
		"Comparisons of this follower's table digest with the leader's at the same applied index.", nil, nil)
	descDigestMismatches = prometheus.NewDesc("lockd_digest_mismatches_total",
		"Digest comparisons that differed: this node's state diverged.", nil, nil)
	descQuorumLost = prometheus.NewDesc("lockd_quorum_lost",
		"1 when this node reaches fewer voters than a majority, as its raft sees them (GET /v1/status quorum_lost).", nil, nil)
	descVotersReachable = prometheus.NewDesc("lockd_voters_reachable",
		"Voters this node reaches, itself included (GET /v1/status quorum.reachable).", nil, nil)
)

var raftStates = []string{"leader", "follower", "candidate", "shutdown"}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descRaftLeader, descRaftTerm, descCommitIndex,
		descAppliedIndex, descSessions, descLocks, descHeld, descWaiters, descRequests, descDigestChecks, descDigestMismatches,
		descQuorumLost, descVotersReachable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one raft status and one table
// scan per scrape.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.node.Status()
	for _, state := range raftStates {
		ch <- gauge(descRaftState, b2f(st.State == state), state)
	}
	ch <- gauge(descRaftLeader, b2f(st.LeaderID != ""))
	ch <- gauge(descRaftTerm, float64(st.Term))
	ch <- gauge(descCommitIndex, float64(st.CommitIndex))
	ch <- gauge(descAppliedIndex, float64(c.s.locks.AppliedIndex()))
	stats := c.s.locks.Stats()
	ch <- gauge(descSessions, float64(stats.Sessions))
	ch <- gauge(descLocks, float64(stats.Locks))
	ch <- gauge(descHeld, float64(stats.Holds))
	ch <- gauge(descWaiters, float64(stats.Waiters))
	ch <- gauge(descRequests, float64(stats.Requests))
	dc := c.s.node.DigestChecks()
	ch <- prometheus.MustNewConstMetric(descDigestChecks, prometheus.CounterValue, float64(dc.Compared))
	ch <- prometheus.MustNewConstMetric(descDigestMismatches, prometheus.CounterValue, float64(dc.Mismatches))
	q := c.s.node.Quorum()
	ch <- gauge(descQuorumLost, b2f(q.Lost))
	ch <- gauge(descVotersReachable, float64(len(q.Reachable)))
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
