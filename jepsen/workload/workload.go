// Package workload drives lockd with concurrent clients (the Go client,
// one session per history process) and records every operation in a
// history: the mutex, semaphore, rw, multi, deadlock, hierarchy and
// election workloads of the Jepsen suite.
package workload

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/jepsen/history"
	"github.com/lockd/lockd/jepsen/resource"
)

// Env is what the workers of a run share.
type Env struct {
	Rec       *history.Recorder
	Res       *resource.Resource
	Endpoints []string      // every node's HTTP address
	TTL       time.Duration // session TTL
	Wait      time.Duration // server-side wait of an acquire
	Hold      time.Duration // mean time a holder works
	// HoldTTL, if set, is the hold TTL of every acquire: holders use the
	// resource only before their grant's deadline (client.Grant.Deadline).
	HoldTTL time.Duration
	Pauses  *Pauses // client pauses asked by the nemesis (may be nil)
	Seed    uint64
	Log     *slog.Logger
	TLS     *tls.Config // the cluster's HTTPS; nil: plain HTTP
	// Tokens are the ACL secrets of the workers (worker i uses
	// Tokens[i mod len]); none: a cluster without ACLs.
	Tokens []string
	// Intruder is the ACL secret of the intruder (intruder.go); "" runs
	// none.
	Intruder string
	// Observer is the ACL secret the workers' observes read with: a lock
	// view names only the caller's own sessions, and the checkers need
	// every holder's, so with Tokens it is the management token.
	Observer string

	elements atomic.Int64
	procs    atomic.Int64
	targets  targets
}

func (e *Env) nextElement() int64 { return e.elements.Add(1) }

// Workload is one kind of client behaviour.
type Workload interface {
	// Name is the workload's name on the command line.
	Name() string
	// Cycle runs one round for p: acquire, use the resource, release.
	Cycle(ctx context.Context, p *Proc)
	// Final is the liveness round after the final heal: one acquire that
	// must be granted within wait, then its release.
	Final(ctx context.Context, p *Proc, wait time.Duration)
	// Limit is the semaphore limit the workload uses (0: none).
	Limit() int
}

// Names lists the workloads.
var Names = []string{"mutex", "semaphore", "rw", "multi", "deadlock", "hierarchy", "election"}

// New returns the workload called name.
func New(name string) (Workload, error) {
	switch name {
	case "mutex":
		return mutex{}, nil
	case "semaphore":
		return semaphore{limit: 2}, nil
	case "rw":
		return rw{}, nil
	case "multi":
		return multi{}, nil
	case "deadlock":
		return deadlock{}, nil
	case "hierarchy":
		return hierarchy{}, nil
	case "election":
		return election{}, nil
	}
	return nil, fmt.Errorf("unknown workload %q (want one of %v)", name, Names)
}

// worker is one client goroutine: one Go client (with its own pause
// gate) and a succession of processes.
type worker struct {
	idx   int
	env   *Env
	c     *client.Client
	obs   *client.Client // c's endpoints and gate, with Env.Observer's token
	hc    *http.Client   // c's transport (TLS and gate), for the calls c lacks
	token string         // c's ACL secret ("" without ACLs)
	gate  *gate
	rng   *rand.Rand
	proc  *Proc
	// electionIndex is the version of the last election read (Follow),
	// which the next one blocks on.
	electionIndex uint64
}

// Clients is a set of workers.
type Clients struct {
	env     *Env
	w       Workload
	workers []*worker
}

// NewClients makes n workers; worker i talks first to endpoint i mod
// len(endpoints) (the client then follows the leader).
func NewClients(env *Env, w Workload, n int) (*Clients, error) {
	if env.Log == nil {
		env.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if len(env.Tokens) > 0 && env.Observer == "" {
		// A worker's own token sees only its own sessions in a lock view:
		// observes would record other holders without a session.
		return nil, errors.New("workload: Env.Tokens without Env.Observer: observes need a token that sees every session")
	}
	cs := &Clients{env: env, w: w}
	for i := range n {
		eps := make([]string, 0, len(env.Endpoints))
		for j := range env.Endpoints {
			eps = append(eps, env.Endpoints[(i+j)%len(env.Endpoints)])
		}
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.TLSClientConfig = env.TLS // the gate is no *http.Transport: TLS goes on the one below it
		g := &gate{base: base}
		hc := &http.Client{Transport: g}
		token := ""
		if len(env.Tokens) > 0 {
			token = env.Tokens[i%len(env.Tokens)]
		}
		with := func(token string) (*client.Client, error) {
			return client.NewWith(eps, client.WithHTTPClient(hc), client.WithLogger(env.Log),
				client.WithTLS(env.TLS), client.WithToken(token))
		}
		c, err := with(token)
		if err != nil {
			return nil, err
		}
		obs := c
		if env.Observer != "" {
			if obs, err = with(env.Observer); err != nil {
				return nil, err
			}
		}
		cs.workers = append(cs.workers, &worker{idx: i, env: env, c: c, obs: obs, hc: hc, token: token, gate: g,
			rng: rand.New(rand.NewPCG(env.Seed, uint64(i)))})
	}
	return cs, nil
}

// proc returns the worker's live process, opening a new session when
// the last one retired. nil when ctx ends first.
func (w *worker) procFor(ctx context.Context) *Proc {
	if w.proc != nil && !w.proc.retired {
		return w.proc
	}
	if w.proc != nil {
		w.proc.close(ctx)
		w.proc = nil
	}
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, min(opTimeout, 2*w.env.TTL))
		s, err := w.c.NewSession(sctx, w.env.TTL, client.WithSessionName("jepsen-w"+strconv.Itoa(w.idx)))
		cancel()
		if err == nil {
			w.proc = &Proc{ID: int(w.env.procs.Add(1) - 1), w: w, s: s, rng: w.rng}
			return w.proc
		}
		w.env.Log.Info("jepsen: new session failed", "worker", w.idx, "err", err)
		Sleep(ctx, 200*time.Millisecond)
	}
	return nil
}

// Run runs cycles on every worker until ctx ends.
func (cs *Clients) Run(ctx context.Context) {
	if cs.env.Intruder != "" {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			cs.env.intrude(ctx)
		}()
	}
	cs.each(ctx, func(w *worker, p *Proc) bool {
		cs.w.Cycle(ctx, p)
		Sleep(ctx, time.Duration(w.rng.Int64N(int64(cs.env.Hold)+1)))
		return false
	})
}

// Final runs the liveness round on every worker at once: each must be
// granted within wait. A worker whose process retires before invoking an
// acquire (its session found lost) goes on with a new one. The round
// ends after 2×wait + 5s whatever happens (the liveness checker then
// reports the clients that were not served).
func (cs *Clients) Final(ctx context.Context, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, 2*wait+5*time.Second)
	defer cancel()
	cs.each(ctx, func(_ *worker, p *Proc) bool {
		before := p.acquires
		cs.w.Final(ctx, p, wait)
		return p.acquires > before
	})
}

// each runs round on every worker concurrently, with its live process,
// until round returns true or ctx ends.
func (cs *Clients) each(ctx context.Context, round func(w *worker, p *Proc) (done bool)) {
	var wg sync.WaitGroup
	for _, w := range cs.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				p := w.procFor(ctx)
				if p == nil || round(w, p) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Close closes every worker's session (recorded), so that the history
// ends with nothing held.
func (cs *Clients) Close(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range cs.workers {
		if w.proc == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.proc.close(ctx)
		}()
	}
	wg.Wait()
}

// FinalRead records the resource's registers, for the set-full check.
func FinalRead(rec *history.Recorder, res *resource.Resource) {
	rec.Add(history.Event{Type: history.OK, Process: history.Harness, F: history.FinalRead, Values: res.Snapshot()})
}

func itoa(i int) string { return strconv.Itoa(i) }

// jitter returns a duration in [d/2, 3d/2).
func jitter(r *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(r.Int64N(int64(d)))
}
