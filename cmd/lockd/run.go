package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/cluster"
	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/raftnode"
	"github.com/lockd/lockd/raftnode/certs"
)

// Shutdown budgets.
const (
	httpDrain    = 5 * time.Second  // in-flight requests finish (waits were already ended)
	raftStop     = 10 * time.Second // leadership transfer, then raft and stores
	leaveTimeout = 30 * time.Second // until the leader has removed us from raft
)

// errLeft ends a node that left the cluster for good: a clean exit.
var errLeft = errors.New("left the cluster")

// agent is one running node: raft, the HTTP API and (unless --dev) gossip.
type agent struct {
	cfg  *config
	log  hclog.Logger
	node *raftnode.Node
	srv  *api.Server
	http *http.Server
	tls  *certs.Store // nil without --tls-*

	// clockOffset is the clock hook's wall-clock offset (ns); nil when
	// the hook is off.
	clockOffset *atomic.Int64

	dir cluster.Directory               // raftnode asks for peers before gossip runs
	cl  atomic.Pointer[cluster.Cluster] // set once gossip runs

	stop      context.CancelCauseFunc
	serveErrs chan error
}

// run wires the node together and serves until ctx ends or the node
// leaves the cluster: raftnode.Open, the HTTP API, then gossip (which may
// bootstrap raft, so the API is up before peers can forward to it).
func run(ctx context.Context, cfg *config) error {
	a := &agent{cfg: cfg, serveErrs: make(chan error, 1),
		log: hclog.New(&hclog.LoggerOptions{Name: "lockd", Level: hclog.LevelFromString(cfg.LogLevel),
			JSONFormat: cfg.LogJSON, Output: os.Stderr})}
	if cfg.Dev {
		cleanup, err := devSetup(cfg, a.log)
		if err != nil {
			return err
		}
		defer cleanup()
	}
	ctx, a.stop = context.WithCancelCause(ctx)
	defer a.stop(nil)

	if err := a.loadTLS(ctx); err != nil {
		return err
	}
	if cfg.Insecure {
		a.log.Warn("--insecure: ports beyond loopback accept anyone who reaches them, without TLS or a gossip key")
	}
	if err := a.openRaft(); err != nil {
		return err
	}
	if err := a.serveHTTP(); err != nil {
		a.stopRaft()
		return err
	}
	if err := a.join(); err != nil {
		a.stop(err)
	} else {
		a.log.Info("node running", "id", cfg.NodeID, "dev", cfg.Dev, "log_store", a.node.Status().LogStore)
	}

	select {
	case <-ctx.Done():
	case err := <-a.serveErrs:
		a.stop(fmt.Errorf("http server: %w", err))
	}
	cause := context.Cause(ctx)
	a.log.Info("shutting down", "reason", cause)
	a.shutdown()
	if errors.Is(cause, context.Canceled) || errors.Is(cause, errLeft) {
		return nil
	}
	return cause
}

func (a *agent) peerHTTP(id string) (string, bool) {
	if id == a.cfg.NodeID {
		return a.cfg.HTTPAdvertise, true
	}
	return a.dir.HTTPAddr(id)
}

// loadTLS loads the node's certificates (--tls-*) and reloads them on
// SIGHUP until ctx ends: new connections get the new ones.
func (a *agent) loadTLS(ctx context.Context) error {
	if a.cfg.TLSCA == "" {
		return nil
	}
	store, err := certs.Load(certs.Files{CA: a.cfg.TLSCA, Cert: a.cfg.TLSCert, Key: a.cfg.TLSKey})
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	if id := store.NodeID(); id != a.cfg.NodeID {
		return fmt.Errorf("tls: %s names node %q, not --node-id %q: peers check that a node's certificate names it",
			a.cfg.TLSCert, id, a.cfg.NodeID)
	}
	a.tls = store
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-hup:
				if err := store.Reload(); err != nil {
					a.log.Error("SIGHUP: certificates not reloaded; keeping the current ones", "error", err)
				} else {
					a.log.Info("SIGHUP: certificates reloaded")
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return nil
}

func (a *agent) openRaft() error {
	cfg := raftnode.Config{ID: a.cfg.NodeID, DataDir: a.cfg.DataDir, RaftBind: a.cfg.RaftAddr,
		RaftAdvertise: a.cfg.RaftAdvertise, Logger: a.log.Named("node"), Timing: a.cfg.RaftTiming,
		SnapshotThreshold: a.cfg.SnapshotThreshold, SnapshotInterval: a.cfg.SnapshotInterval, TrailingLogs: a.cfg.TrailingLogs,
		Limits: a.cfg.Limits, LogStore: a.cfg.RaftLog, MaxLeaderWaits: a.cfg.MaxLeaderWaits,
		// Fail-stop, as etcd does on a WAL write error: the supervisor
		// restarts the node, which reads its log back from disk.
		StoreFailed: func(err error) { a.stop(fmt.Errorf("raft log write failed (full or failing disk?): %w", err)) }}
	if err := a.applyHarness(&cfg); err != nil {
		return err
	}
	if a.tls != nil {
		cfg.PeerServerTLS, cfg.PeerClientTLS = a.tls.PeerServer(), a.tls.PeerClient()
	}
	node, err := raftnode.Open(cfg)
	if err != nil {
		return fmt.Errorf("open raft node: %w", err)
	}
	a.node = node
	if a.tls != nil {
		// Every TLS port refuses a denied certificate at its handshake,
		// reading the deny list this node has applied (it survives SIGHUP).
		a.tls.SetDenied(node.CertDenied)
	}
	return nil
}

func (a *agent) serveHTTP() error {
	apiCfg := api.Config{Node: a.node, HTTPAddr: a.cfg.HTTPAdvertise, PeerHTTP: a.peerHTTP, Logger: a.log,
		MaxWait: a.cfg.MaxWait, OperatorCert: a.tls != nil, ACL: a.cfg.ACL, AllowedOrigins: a.cfg.Origins,
		MaxWaits: a.cfg.MaxWaits, MaxStreams: a.cfg.MaxStreams, MaxStreamDuration: a.cfg.MaxStreamDuration,
		ClockOffset: a.clockOffset}
	if !a.cfg.Dev {
		apiCfg.Members = func() []wire.Member { return members(a.cl.Load()) }
		apiCfg.Leave = a.leave
	}
	srv, err := api.New(apiCfg)
	if err != nil {
		return err
	}
	if err := raftMetrics(srv.Registerer()); err != nil {
		srv.Close()
		return err
	}
	ln, err := net.Listen("tcp", a.cfg.HTTPAddr)
	if err != nil {
		srv.Close()
		return fmt.Errorf("http listen: %w", err)
	}
	a.srv = srv
	ln = api.LimitListener(ln, a.cfg.MaxConns, srv.ConnRefused)
	// No WriteTimeout: waits are bounded by --max-wait instead.
	a.http = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    a.log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}
	scheme := "http"
	if a.tls != nil {
		scheme = "https"
		a.http.TLSConfig = a.tls.APIServer(a.cfg.TLSClientAuth)
		ln = tls.NewListener(ln, a.http.TLSConfig)
	}
	go func() { a.serveErrs <- a.http.Serve(ln) }()
	a.log.Info("http api listening", "addr", ln.Addr().String(), "advertise", a.cfg.HTTPAdvertise, "scheme", scheme,
		"client_certs", a.cfg.TLSClientAuth)
	return nil
}

// join starts gossip, which bootstraps or joins raft; a --dev node
// bootstraps itself alone instead, and so does a node the harness leaves
// alone (harness.go).
func (a *agent) join() error {
	if a.cfg.Dev || a.cfg.harness.alone {
		return devBootstrap(a.node, a.cfg.NodeID)
	}
	cfg := cluster.Config{ID: a.cfg.NodeID, GossipBind: a.cfg.GossipAddr,
		GossipAdvertise: a.cfg.GossipAdvert, RaftAddr: a.cfg.RaftAdvertise, HTTPAddr: a.cfg.HTTPAdvertise,
		Join: a.cfg.Join, BootstrapExpect: a.cfg.BootstrapExpect, Logger: a.log.Named("cluster"), Directory: &a.dir,
		GossipKey: a.cfg.GossipKey}
	if a.tls != nil {
		cfg.VerifyPeer = a.node.VerifyPeer // a voter's node certificate must name its id
	}
	cfg.LogFormat = int(fsm.NewestFormat)
	c, err := cluster.Start(cfg, a.node)
	if err != nil {
		return fmt.Errorf("start cluster membership: %w", err)
	}
	if !a.cfg.harness.ungated {
		a.node.SetLogFormat(c.LogFormat) // a rolling upgrade: nothing a voter's older build cannot apply
	}
	a.node.SetJoinRule(c.JoinPeer) // a node outside the configuration hears raft only from these
	a.node.SetGossipGone(c.Gone)   // for the voters raft has not asked lately
	a.cl.Store(c)
	return nil
}

// leave is POST /v1/agent/leave: out of gossip and the raft configuration
// for good, then stop.
func (a *agent) leave() {
	if c := a.cl.Load(); c != nil {
		a.log.Info("leaving the cluster for good")
		if err := c.Leave(leaveTimeout); err != nil {
			a.log.Error("leave", "error", err)
		}
	}
	a.stop(errLeft)
}

// shutdown stops serving and hands leadership over, but stays in the raft
// configuration: a restart is not a leave. Raft stops (handing leadership
// over) before the HTTP listener closes: a leader that cannot be reached
// for keepalives must not keep expiring sessions while it drains.
func (a *agent) shutdown() {
	a.srv.Close() // waits in flight answer 503 with their request id
	a.stopRaft()
	ctx, cancel := context.WithTimeout(context.Background(), httpDrain)
	if err := a.http.Shutdown(ctx); err != nil {
		a.http.Close()
	}
	cancel()
	if c := a.cl.Load(); c != nil {
		if err := c.Shutdown(); err != nil {
			a.log.Error("gossip shutdown", "error", err)
		}
	}
}

func (a *agent) stopRaft() {
	ctx, cancel := context.WithTimeout(context.Background(), raftStop)
	defer cancel()
	if err := a.node.Shutdown(ctx); err != nil {
		a.log.Error("raft shutdown", "error", err)
	}
}

// applyHarness does to the raft node's cfg what the jepsen suite's flags
// ask (harness.go; nothing in a production build) and turns the clock
// hook on if they ask for it.
func (a *agent) applyHarness(cfg *raftnode.Config) error {
	h := a.cfg.harness
	if h.warning != "" {
		a.log.Error(h.warning)
	}
	if h.node != nil {
		if err := h.node(cfg); err != nil {
			return err
		}
	}
	if h.clockHook {
		a.clockOffset = new(atomic.Int64)
		cfg.ClockOffset = func() time.Duration { return time.Duration(a.clockOffset.Load()) }
		a.log.Warn("TEST HOOK: operators may offset this node's wall clock (PUT /v1/debug/clock)")
	}
	return nil
}

// members adapts the gossip view for the API.
func members(c *cluster.Cluster) []wire.Member {
	if c == nil {
		return nil
	}
	ms := c.Members()
	out := make([]wire.Member, len(ms))
	for i, m := range ms {
		out[i] = wire.Member{ID: m.ID, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, GossipAddr: m.GossipAddr,
			Status: m.Status}
	}
	return out
}

// devSetup gives a --dev node a temporary data dir, removed at exit.
func devSetup(cfg *config, log hclog.Logger) (func(), error) {
	cleanup := func() {}
	if cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "lockd-dev-")
		if err != nil {
			return nil, fmt.Errorf("dev data dir: %w", err)
		}
		cfg.DataDir = dir
		cleanup = func() { os.RemoveAll(dir) }
	}
	log.Warn("dev mode: one node, temporary data, not for production", "data_dir", cfg.DataDir, "http", cfg.HTTPAddr)
	return cleanup, nil
}

// devBootstrap makes a fresh --dev node a one-voter cluster.
func devBootstrap(node *raftnode.Node, id string) error {
	if node.HasState() {
		return nil
	}
	if err := node.Bootstrap([]raftnode.Server{{ID: id, Addr: node.RaftAddr(), Voter: true}}); err != nil {
		return fmt.Errorf("dev bootstrap: %w", err)
	}
	return nil
}
