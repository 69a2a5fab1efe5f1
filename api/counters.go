package api

import (
	"github.com/prometheus/client_golang/prometheus"
)

// tableCounters exports what this node's lock table has applied
// (lockstate.Counters) as Prometheus counters. Every node applies the
// same log, so every node counts the same; a node that restored a
// snapshot starts again from 0, which rate() handles as a counter reset.
type tableCounters struct{ s *Server }

var (
	descGrants = prometheus.NewDesc("lockd_grants_total",
		"Locks granted (one per granted lock of a request), as applied by this node.", nil, nil)
	descHandoffs = prometheus.NewDesc("lockd_handoffs_total",
		"Locks granted to a request that had waited in a queue (a release, expiry, cancel or revoke handed them on).", nil, nil)
	descTimeouts = prometheus.NewDesc("lockd_timeouts_total",
		"Acquire requests not granted within their wait (wait 0 included).", nil, nil)
	descDeadlocks = prometheus.NewDesc("lockd_deadlocks_total",
		"Deadlocks broken, by outcome: abort (a victim's requests failed) or surrender (a victim gave up its holds).", []string{"outcome"}, nil)
	descCancels = prometheus.NewDesc("lockd_cancels_total",
		"Pending requests cancelled, by a client or by the end of their session.", nil, nil)
	descSessionExpiries = prometheus.NewDesc("lockd_session_expiries_total",
		"Sessions expired because their keepalives stopped.", nil, nil)
	descExpiryEntries = prometheus.NewDesc("lockd_session_expiry_entries_total",
		"Log entries that expired sessions: the leader ends many in one entry (lockd_session_expiries_total over this is the batching).", nil, nil)
	descHoldExpiries = prometheus.NewDesc("lockd_hold_expiries_total",
		"Holds ended by hold_ttl or by their session's expiry.", nil, nil)
	descRevokes = prometheus.NewDesc("lockd_revoked_holds_total",
		"Holds revoked by an operator (POST /v1/revoke).", nil, nil)
	descSurrenders = prometheus.NewDesc("lockd_surrenders_total",
		"Holds surrendered to waiters, by a client or a deadlock victim.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c tableCounters) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGrants, descHandoffs, descTimeouts, descDeadlocks, descCancels,
		descSessionExpiries, descExpiryEntries, descHoldExpiries, descRevokes, descSurrenders} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c tableCounters) Collect(ch chan<- prometheus.Metric) {
	n := c.s.locks.Counters()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descGrants, n.Grants)
	counter(descHandoffs, n.Handoffs)
	counter(descTimeouts, n.Timeouts)
	counter(descDeadlocks, n.DeadlockAborts, "abort")
	counter(descDeadlocks, n.DeadlockSurrenders, "surrender")
	counter(descCancels, n.Cancels)
	counter(descSessionExpiries, n.SessionExpiries)
	counter(descExpiryEntries, n.ExpiryEntries)
	counter(descHoldExpiries, n.HoldExpiries)
	counter(descRevokes, n.Revokes)
	counter(descSurrenders, n.Surrenders)
}
