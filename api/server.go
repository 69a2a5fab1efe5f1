// Package api serves lockd's HTTP API (docs/api.md): sessions, acquire,
// release and surrender, request long-polls, blocking queries on locks,
// status and Prometheus metrics. It only translates: it decodes JSON,
// calls the node's lock protocol (raftnode/lockservice), encodes the
// answer and maps errors (errors.go). Proposing, retries after an unknown
// outcome, waits, read-index and finding a session by its key all live in
// lockservice.
//
// Errors belong to the layer that makes them: lockservice owns every
// error of the lock protocol and of the cluster that reaches this package
// (its package doc lists them), and errors.go is the one place that turns
// them, and this package's own *Error, into HTTP answers. Of the node this
// package imports only lockservice (and raftnode/certs for TLS), never
// raftnode or fsm.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// Defaults for Config's zero fields.
const (
	DefaultMaxWait        = lockservice.DefaultMaxWait
	DefaultCancelGrace    = lockservice.DefaultCancelGrace
	DefaultProposeTimeout = lockservice.DefaultProposeTimeout
	DefaultMaxBodyBytes   = 64 << 10
	DefaultSessionTTL     = 15 * time.Second
)

// Node is what the API needs of a raft node; *raftnode.Node implements it.
// The lock protocol runs on it through lockservice; the API itself only
// asks for the cluster's view.
type Node interface {
	lockservice.Node
	lockservice.Cluster
	// Diverged is what was compared once this node's state diverged
	// from the leader's, "" before.
	Diverged() string
}

// Config configures a Server.
type Config struct {
	Node Node
	// HTTPAddr is this node's advertised HTTP address, reported when it
	// is the leader and PeerHTTP does not know it.
	HTTPAddr string
	// PeerHTTP returns a node's HTTP address by id (the cluster's gossip
	// metadata); nil means only this node's own address is known.
	PeerHTTP func(id string) (string, bool)
	// Members returns the gossip view of the cluster; nil means the raft
	// configuration alone is reported.
	Members func() []wire.Member
	// OperatorCert makes the operator endpoints (leave, member removal)
	// demand a client certificate signed by the cluster's CA (the TLS
	// listener has verified it): on whenever the API serves HTTPS.
	OperatorCert bool
	// ACL makes every request but GET /v1/status, the dashboard's files
	// and the one-time bootstrap need a token (Authorization: Bearer), and
	// enables POST /v1/acl/bootstrap. Management tokens may also call the
	// operator endpoints.
	ACL bool
	// Leave makes this node leave the cluster for good (POST
	// /v1/agent/leave); nil answers 501. It is called in its own
	// goroutine after the answer is written.
	Leave  func()
	Logger hclog.Logger

	// MaxWait, CancelGrace and ProposeTimeout configure the lock
	// protocol (see lockservice.Config); 0 means their defaults.
	MaxWait        time.Duration
	CancelGrace    time.Duration
	ProposeTimeout time.Duration
	// MaxBodyBytes limits request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxWaits bounds the requests that wait on this node at once
	// (acquires with a wait, request long-polls, blocking queries);
	// MaxStreams the event streams, each of which ends after
	// MaxStreamDuration. 0 means their defaults.
	MaxWaits, MaxStreams int
	MaxStreamDuration    time.Duration
	// AllowedOrigins are the browser origins given CORS access; none
	// means no CORS headers at all.
	AllowedOrigins []string
	// ClockOffset, if set, turns on the clock hook (GET/PUT
	// /v1/debug/clock): TESTING ONLY. It holds the node's wall-clock
	// offset in nanoseconds (raftnode.Config.ClockOffset reads it).
	ClockOffset *atomic.Int64
}

// Server is the HTTP API of one node. It is an http.Handler.
type Server struct {
	cfg     Config
	node    Node
	locks   *lockservice.Service
	log     hclog.Logger
	handler http.Handler
	metrics *metrics
	acl     *aclMetrics
	limits  *limitMetrics
	waits   *slots
	streams *slots
	// denialLog limits the log lines of denied requests (auth.go).
	denialLog denialLimiter
}

// New returns the API server for cfg.Node. Close it to stop its
// background goroutine and end the waits in flight.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil {
		return nil, errors.New("api: Config.Node is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ProposeTimeout == 0 { // it also bounds membership calls here
		cfg.ProposeTimeout = DefaultProposeTimeout
	}
	setDefault(&cfg.MaxWaits, DefaultMaxWaits)
	setDefault(&cfg.MaxStreams, DefaultMaxStreams)
	setDefault(&cfg.MaxStreamDuration, DefaultMaxStreamDuration)
	locks, err := lockservice.New(lockservice.Config{Node: cfg.Node, Logger: cfg.Logger, ACL: cfg.ACL,
		MaxWait: cfg.MaxWait, CancelGrace: cfg.CancelGrace, ProposeTimeout: cfg.ProposeTimeout})
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s := &Server{cfg: cfg, node: cfg.Node, locks: locks, log: cfg.Logger.Named("api"),
		waits: &slots{max: int64(cfg.MaxWaits)}, streams: &slots{max: int64(cfg.MaxStreams)}}
	m, err := newMetrics(s)
	if err != nil {
		locks.Close()
		return nil, fmt.Errorf("api: metrics: %w", err)
	}
	s.metrics = m
	if s.acl, err = newACLMetrics(m.reg); err == nil {
		s.limits, err = newLimitMetrics(m.reg)
	}
	if err != nil {
		locks.Close()
		return nil, fmt.Errorf("api: metrics: %w", err)
	}
	s.handler = s.metrics.instrument(s.cors(s.requireJSON(s.stopWhenDiverged(s.refuseDenied(s.authenticate(s.routes()))))))
	return s, nil
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", s.createSession)
	mux.HandleFunc("GET /v1/sessions", s.listSessions)
	mux.HandleFunc("GET /v1/sessions/{id}", s.getSession)
	mux.HandleFunc("DELETE /v1/sessions/{id}", s.closeSession)
	mux.HandleFunc("POST /v1/sessions/{id}/keepalive", s.keepAlive)
	mux.HandleFunc("POST /v1/sessions/keepalive", s.keepAlives)

	mux.HandleFunc("POST /v1/acquire", s.acquireJSON)
	mux.HandleFunc("PUT /v1/locks/{name...}", s.acquireOne)
	mux.HandleFunc("DELETE /v1/locks/{name...}", s.releaseOne)
	mux.HandleFunc("POST /v1/release", s.release)
	mux.HandleFunc("POST /v1/surrender", s.surrender)
	mux.HandleFunc("POST /v1/proclaim", s.proclaim)
	mux.HandleFunc("GET /v1/requests/{id}", s.getRequest)
	mux.HandleFunc("DELETE /v1/requests/{id}", s.cancelRequest)

	mux.HandleFunc("GET /v1/locks", s.listLocks)
	mux.HandleFunc("GET /v1/locks/{name...}", s.getLock)
	mux.HandleFunc("GET /v1/elections/{name...}", s.getElection)
	mux.HandleFunc("GET /v1/check", s.check)
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/waitgraph", s.waitGraph)
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("POST /v1/acl/bootstrap", s.bootstrapACL)
	mux.HandleFunc("POST /v1/acl/tokens", s.createToken)
	mux.HandleFunc("GET /v1/acl/tokens", s.listTokens)
	mux.HandleFunc("DELETE /v1/acl/tokens/{id}", s.deleteToken)
	mux.HandleFunc("POST /v1/revoke", s.revoke)
	mux.HandleFunc("POST /v1/agent/leave", s.operator(s.leave))
	mux.HandleFunc("DELETE /v1/members/{id}", s.operator(s.removeMember))
	mux.HandleFunc("POST /v1/certs/denied", s.operator(s.denyCert))
	mux.HandleFunc("GET /v1/certs/denied", s.operator(s.listDeniedCerts))
	s.clockRoutes(mux)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.Handle("GET /ui/", uiHandler())
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errorf(wire.CodeNotFound, "no endpoint %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close ends every wait in flight (they answer 503 so that clients
// re-attach on another node). The handler keeps answering other
// requests: stop the http.Server too.
func (s *Server) Close() { s.locks.Close() }

// ---- helpers shared by the handlers -------------------------------------

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do about it
}

// decode reads a JSON body strictly: bounded size, no unknown fields,
// nothing after the value. With optional, an empty body leaves v as is.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return err
		case errors.Is(err, io.EOF) && optional:
			return nil
		case errors.Is(err, io.EOF):
			return invalid("request body is empty; a JSON object is required")
		}
		return invalid("malformed request body: %v", err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return invalid("request body has data after the JSON value")
	}
	return nil
}

// consistency reads ?stale: linearizable unless it is given.
func consistency(r *http.Request) lockservice.Consistency {
	if r.URL.Query().Has("stale") {
		return lockservice.Stale
	}
	return lockservice.Linearizable
}
