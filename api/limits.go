package api

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockd/lockd/api/wire"
)

// Node-local limits (docs/api.md, "Limits"): what one node gives to waits,
// event streams and connections, so that no client can take all of its
// goroutines, memory or files. The limits on the table itself (sessions,
// holds, waiters) are replicated: see lockstate.Limits.

// Defaults of the node-local limits.
const (
	DefaultMaxWaits          = 4096
	DefaultMaxStreams        = 256
	DefaultMaxConns          = 4096
	DefaultMaxStreamDuration = 10 * time.Minute
)

// slots counts what is in use against a maximum.
type slots struct {
	max   int64
	inUse atomic.Int64
}

// take reserves a slot; false when all are taken.
func (s *slots) take() bool {
	if s.inUse.Add(1) > s.max {
		s.inUse.Add(-1)
		return false
	}
	return true
}

func (s *slots) put() { s.inUse.Add(-1) }

// limitMetrics counts refusals by limit.
type limitMetrics struct {
	refusals *prometheus.CounterVec
}

func newLimitMetrics(reg prometheus.Registerer) (*limitMetrics, error) {
	m := &limitMetrics{refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockd_limit_refusals_total",
		Help: "Requests refused by a limit: node-local (waits, streams, conns, leader_waits) or replicated (table: sessions, holds, waiters).",
	}, []string{"limit"})}
	for _, l := range []string{"waits", "streams", "conns", "table", "leader_waits"} {
		m.refusals.WithLabelValues(l)
	}
	return m, reg.Register(m.refusals)
}

// tooMany is the 429 a limit answers.
func tooMany(what string, max int64, flag string) *Error {
	return errorf(wire.CodeLimitExceeded, "this node already serves %d %s, its limit (%s)", max, what, flag)
}

// waitSlot reserves one of the node's waits for a request that will wait,
// and returns its release; a refusal is the error to answer.
func (s *Server) waitSlot(w http.ResponseWriter) (release func(), err *Error) {
	markWait(w)
	if !s.waits.take() {
		s.limits.refusals.WithLabelValues("waits").Inc()
		return nil, tooMany("waits", s.waits.max, "--max-waits")
	}
	return s.waits.put, nil
}

// LimitListener accepts at most max connections at once; one more is
// closed at once (and counted by refused), so that a flood of idle
// connections cannot take all of the node's files.
func LimitListener(l net.Listener, max int, refused func()) net.Listener {
	return &limitListener{Listener: l, slots: &slots{max: int64(max)}, refused: refused}
}

type limitListener struct {
	net.Listener
	slots   *slots
	refused func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.slots.take() {
			return &limitConn{Conn: c, slots: l.slots}, nil
		}
		_ = c.Close()
		if l.refused != nil {
			l.refused()
		}
	}
}

type limitConn struct {
	net.Conn
	slots *slots
	once  sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.slots.put)
	return err
}

// ConnRefused counts a connection LimitListener refused, for /metrics.
func (s *Server) ConnRefused() { s.limits.refusals.WithLabelValues("conns").Inc() }
