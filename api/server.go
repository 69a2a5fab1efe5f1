// Package api serves lockd's HTTP API (docs/api.md): sessions, acquire,
// release and surrender, request long-polls, blocking queries on locks,
// status and Prometheus metrics. Writes go through raftnode.Propose (any
// node forwards to the leader); reads are linearizable through
// raftnode.ReadIndex unless ?stale is given; waits for a grant are served
// by whichever node the client talks to, from that node's applied state.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

// Defaults for Config's zero fields.
const (
	DefaultMaxWait        = 60 * time.Second
	DefaultCancelGrace    = 2 * time.Second
	DefaultProposeTimeout = 10 * time.Second
	DefaultMaxBodyBytes   = 64 << 10
	DefaultSessionTTL     = 15 * time.Second
)

// maxUnknownRetries bounds how often an idempotent proposal whose outcome
// is unknown is sent again.
const maxUnknownRetries = 4

// Node is what the API needs of a raft node; *raftnode.Node implements it.
type Node interface {
	FSM() *fsm.FSM
	Propose(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error)
	ReadIndex(ctx context.Context) error
	KeepAlive(ctx context.Context, id lockstate.SessionID) (time.Duration, error)
	Status() raftnode.Status
	Servers() ([]raftnode.Server, error)
	RemoveServer(id string) error
	Handler() http.Handler
}

var _ Node = (*raftnode.Node)(nil)

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
	Members func() []Member
	// Leave makes this node leave the cluster for good (POST
	// /v1/agent/leave); nil answers 501. It is called in its own
	// goroutine after the answer is written.
	Leave  func()
	Logger hclog.Logger

	// MaxWait caps every wait (acquire, request long-poll, blocking
	// query); 0 means DefaultMaxWait.
	MaxWait time.Duration
	// CancelGrace is how long past the end of its wait an acquire that is
	// still pending (no leader ticked its deadline) waits before this node
	// proposes a cancel; 0 means DefaultCancelGrace.
	CancelGrace time.Duration
	// ProposeTimeout bounds one proposal or read-index; 0 means
	// DefaultProposeTimeout.
	ProposeTimeout time.Duration
	// MaxBodyBytes limits request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Server is the HTTP API of one node. It is an http.Handler.
type Server struct {
	cfg     Config
	node    Node
	fsm     *fsm.FSM
	log     hclog.Logger
	handler http.Handler
	watch   *watchers
	metrics *metrics

	closing   chan struct{} // closed by Close: waits end with 503
	closeOnce sync.Once
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
	setDefault(&cfg.MaxWait, DefaultMaxWait)
	setDefault(&cfg.CancelGrace, DefaultCancelGrace)
	setDefault(&cfg.ProposeTimeout, DefaultProposeTimeout)
	setDefault(&cfg.MaxBodyBytes, DefaultMaxBodyBytes)

	s := &Server{cfg: cfg, node: cfg.Node, fsm: cfg.Node.FSM(), log: cfg.Logger.Named("api"),
		closing: make(chan struct{})}
	s.watch = newWatchers(s.fsm)
	m, err := newMetrics(s)
	if err != nil {
		s.watch.close()
		return nil, fmt.Errorf("api: metrics: %w", err)
	}
	s.metrics = m
	s.handler = s.metrics.instrument(s.routes())
	return s, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", s.createSession)
	mux.HandleFunc("GET /v1/sessions", s.listSessions)
	mux.HandleFunc("GET /v1/sessions/{id}", s.getSession)
	mux.HandleFunc("DELETE /v1/sessions/{id}", s.closeSession)
	mux.HandleFunc("POST /v1/sessions/{id}/keepalive", s.keepAlive)

	mux.HandleFunc("POST /v1/acquire", s.acquireJSON)
	mux.HandleFunc("PUT /v1/locks/{name...}", s.acquireOne)
	mux.HandleFunc("DELETE /v1/locks/{name...}", s.releaseOne)
	mux.HandleFunc("POST /v1/release", s.release)
	mux.HandleFunc("POST /v1/surrender", s.surrender)
	mux.HandleFunc("GET /v1/requests/{id}", s.getRequest)
	mux.HandleFunc("DELETE /v1/requests/{id}", s.cancelRequest)

	mux.HandleFunc("GET /v1/locks", s.listLocks)
	mux.HandleFunc("GET /v1/locks/{name...}", s.getLock)
	mux.HandleFunc("GET /v1/check", s.check)
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/waitgraph", s.waitGraph)
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("POST /v1/agent/leave", s.leave)
	mux.HandleFunc("DELETE /v1/members/{id}", s.removeMember)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.Handle("GET /ui/", uiHandler())
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))

	mux.Handle("/internal/", s.node.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errorf(http.StatusNotFound, CodeNotFound, "no endpoint %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close ends every wait in flight (they answer 503 so that clients
// re-attach on another node) and stops the event watcher. The handler
// keeps answering other requests: stop the http.Server too.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.watch.close()
	})
}

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

// propose commits cmd and returns the table's result, turning a domain
// failure into an error. raftnode already waits out an election; a
// proposal whose outcome is unknown is sent again here only when
// idempotent (repeating it cannot apply it twice).
func (s *Server) propose(ctx context.Context, cmd lockstate.Command, idempotent bool) (*lockstate.Result, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProposeTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		res, idx, err := s.node.Propose(ctx, cmd)
		switch {
		case err == nil && res == nil:
			return nil, idx, fmt.Errorf("propose %T: no result at index %d", cmd, idx)
		case err == nil && res.Err != nil:
			return res, idx, res.Err
		case err == nil:
			return res, idx, nil
		case !errors.Is(err, raftnode.ErrUnknownOutcome) || !idempotent || attempt == maxUnknownRetries:
			if attempt > 0 && !errors.Is(err, raftnode.ErrUnknownOutcome) {
				err = errors.Join(raftnode.ErrUnknownOutcome, err) // an earlier attempt may have committed
			}
			return nil, 0, fmt.Errorf("propose %T: %w", cmd, err)
		}
		s.log.Debug("retrying a proposal whose outcome is unknown", "cmd", fmt.Sprintf("%T", cmd), "attempt", attempt+1)
		if err := sleep(ctx, time.Duration(50<<attempt)*time.Millisecond); err != nil {
			return nil, 0, fmt.Errorf("propose %T: %w", cmd, errors.Join(raftnode.ErrUnknownOutcome, err))
		}
	}
}

// readIndex makes the local table current for a linearizable read, unless
// the request asks for ?stale.
func (s *Server) readIndex(r *http.Request) error {
	if r.URL.Query().Has("stale") {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ProposeTimeout)
	defer cancel()
	if err := s.node.ReadIndex(ctx); err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// capWait bounds a client's wait by the server's maximum long-poll.
func (s *Server) capWait(d time.Duration) time.Duration { return min(d, s.cfg.MaxWait) }
