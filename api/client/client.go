// Package client is the Go client of lockd, a Raft-replicated lock
// service (see docs/api.md for the HTTP API it speaks).
//
// A Client knows a few endpoints, learns the leader from /v1/status and
// sends every call to it directly. Locks belong to a Session, which the
// Client keeps alive with keepalives every TTL/3 and reports lost on its
// Done channel; the keepalives of a Client's sessions that fall due
// together go in one request (POST /v1/sessions/keepalive), so that a
// process may keep thousands of sessions:
//
//	c, err := client.New("127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003")
//	s, err := c.NewSession(ctx, 10*time.Second)
//	defer func() { // bounded: an outage must not hold up the exit
//		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
//		defer cancel()
//		s.Close(ctx)
//	}()
//	g, err := s.Lock(ctx, "jobs/backup")
//	// ... work, passing g.Token to the resources it writes ...
//	err = s.Unlock(ctx, "jobs/backup")
//
// Whole programs — a mutex, a semaphore, fencing tokens, a multi-lock —
// are the package's examples (api/client/example_test.go, also shown by
// pkg.go.dev and godoc; `go doc` does not show examples): each talks to the
// cluster LOCKD_ADDR names, e.g. a dev node started with `go run
// ./cmd/lockd --dev` (LOCKD_ADDR=127.0.0.1:7001), and `go test -run
// Example ./api/client` runs them against a dev node of its own.
//
// # Retries and failover
//
// When a call fails because the node is unreachable or answers that it
// cannot serve it (503 no_leader or diverged: the codes wire.ErrorCodes
// marks Retry), the client forgets the leader, backs off (exponentially,
// with jitter, bounded by RetryPolicy; at least the answer's Retry-After,
// when a node turned the call away for load), learns the leader again
// from any endpoint and retries — but only calls that are safe to repeat, and
// not once every endpoint has refused the connection or answered that it
// lost its quorum (Error.QuorumLost: no leader can be elected where the
// client reaches): that answer is returned at once. Retried calls are:
//
//   - reads (status, locks, check, sessions, request long-polls),
//     keepalives, cancels (DELETE /v1/requests/{id}) and session deletes
//     are repeated freely;
//   - creating a session is repeated freely too: a duplicate left behind
//     by a lost answer holds nothing and expires after its TTL;
//   - an acquire carries a request_id made by the client (crypto/rand),
//     so the server never queues it twice. When its answer is lost the
//     client re-attaches with GET /v1/requests/{id}?session=&wait= on any node
//     instead of proposing again, and re-sends the same acquire only if
//     the cluster never saw it;
//   - release (Unlock) and Surrender are not idempotent. They are resent
//     only when the connection failed (refused, or not made within the
//     connect timeout: nothing was sent). After an unknown outcome Unlock
//     asks the cluster what the session still holds and resends only if
//     the hold is provably still there; Surrender returns an error
//     wrapping ErrUnknownOutcome.
//
// # Outages
//
// A node that takes no connection (a dead host, a stopped container)
// costs a call RetryPolicy.ConnectTimeout (1s) before the next node is
// tried; a node that takes the connection and then hangs (a paused
// process) costs AttemptTimeout (5s; a keepalive: TTL/4). ctx bounds a
// whole call: give Check a deadline on a resource's hot path. When a
// call gives up, its error is the last answer a node gave — typically a
// 503 no_leader whose message says how many voters the node reaches, with
// Error.QuorumLost — rather than the failure of the last node tried,
// which may only be a dead one's timeout; a session lost by its
// keepalives wraps that answer in Err the same way. Closing a lost
// session sends nothing (the cluster expires it); any other Close is
// bounded by its ctx, so a deferred Close should get a short one.
//
// # Waiting and cancellation
//
// Lock, RLock and Acquire wait until the grant or until ctx ends; Acquire
// with Wait(d) lets the server end the wait after d instead, with the
// definite ErrTimeout, and TryLock and Wait(0) try once. A server caps
// each wait (60s by default); a request that times out on the server
// while ctx still allows waiting is replaced by a new one (the old one
// has ended, so nothing can be granted twice). When ctx ends
// first, the client cancels the pending request on the server (DELETE
// /v1/requests/{id}); if the cluster answers that the request was granted
// meanwhile, the client releases that grant and still returns ctx.Err().
//
// # Leader election
//
// Session.Election(name) campaigns for name; Client.Election(name) only
// observes it. The leader is the name's holder, its hold's value says
// where to reach it, and its fencing token is the term. The names are
// etcd's concurrency.Election's: Campaign (an acquire with a value) gives
// a Leadership with Token, Value, Lost, Proclaim and Resign; Leader and
// Observe read the election. docs/api.md ("Go client" under "Leader
// election") maps etcd's and Curator's LeaderLatch and LeaderSelector
// calls onto these. Example_leaderElection is a replica that serves only
// while elected and a client that routes to the leader.
//
// # TLS
//
// Plain HTTP is the default. WithTLS(cfg) makes every call HTTPS, to the
// configured endpoints and to the leader and members learned from
// /v1/status alike; TLSConfig builds cfg from PEM files. Without WithTLS,
// New and NewWith read these environment variables beside LOCKD_ADDR:
//
//	LOCKD_CACERT       CA certificate(s) the nodes' certificates chain to
//	                   (default: the system roots)
//	LOCKD_CLIENT_CERT  client certificate, for nodes run with
//	                   --tls-client-auth (a node certificate also works)
//	LOCKD_CLIENT_KEY   its key
//
// Setting LOCKD_CACERT, or the certificate and its key, switches HTTPS on.
// A handshake that fails for good (the node's certificate does not
// verify, the node refuses the client's, or the node speaks plain HTTP) is
// not retried.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client talks to a lockd cluster. It is safe for concurrent use.
type Client struct {
	hc     *http.Client
	log    *slog.Logger
	retry  RetryPolicy
	scheme string      // of learned endpoints: the first configured one's, https with TLS
	tls    *tls.Config // WithTLS or the environment; nil: plain HTTP
	tlsSet bool        // WithTLS was given: the environment does not count
	token  string      // ACL secret sent as a bearer token; "" for none
	tokSet bool        // WithToken was given: LOCKD_TOKEN does not count
	keeper *keeper     // sends the sessions' keepalives, batched (keeper.go)

	mu        sync.Mutex
	endpoints []string             // base URLs: configured first, then learned members
	next      int                  // endpoint to try when the leader is unknown
	leader    string               // base URL of the leader; "" when unknown
	learned   bool                 // learnLeader ran since the last failure
	learnedAt time.Time            // when learnLeader last ran
	down      map[string]time.Time // endpoints avoided until then
	silent    map[string]time.Time // those of them that gave no answer: not asked for the leader either
}

// RetryPolicy bounds the retries of calls that are safe to repeat.
type RetryPolicy struct {
	// MinBackoff is the pause after the first failure; it doubles per
	// attempt up to MaxBackoff (with jitter).
	MinBackoff, MaxBackoff time.Duration
	// MaxElapsed bounds the retries of one call (the context may end
	// it sooner); 0 means retry until the context ends.
	MaxElapsed time.Duration
	// AttemptTimeout bounds one HTTP attempt, on top of the server-side
	// wait of a long-poll. A node retries a write internally while it
	// has no leader, so this should exceed a leader election; it should
	// not be much longer, because it is also how long a hung node (a
	// paused VM, a partition that leaves connections open) holds a call
	// before the client tries another one.
	AttemptTimeout time.Duration
	// ConnectTimeout bounds making a new connection: the dial and, with
	// TLS, the handshake. A node that takes no connection at all (a dead
	// host, a stopped container: its SYNs go unanswered) then costs a
	// call this long before the next node is tried, not AttemptTimeout.
	// It applies to the client's own transport: with WithHTTPClient, that
	// client's dial and handshake timeouts count instead.
	ConnectTimeout time.Duration
	// StatusTimeout bounds one /v1/status while learning the leader.
	StatusTimeout time.Duration
}

// DefaultRetryPolicy is the policy of a Client without WithRetryPolicy.
var DefaultRetryPolicy = RetryPolicy{
	MinBackoff:     50 * time.Millisecond,
	MaxBackoff:     2 * time.Second,
	MaxElapsed:     30 * time.Second,
	AttemptTimeout: 5 * time.Second,
	ConnectTimeout: time.Second,
	StatusTimeout:  2 * time.Second,
}

// Option configures a Client.
type Option func(*Client)

// EnvToken holds the ACL token's secret the client sends when WithToken
// is not given.
const EnvToken = "LOCKD_TOKEN"

// WithToken sets the ACL token's secret sent on every request
// (Authorization: Bearer); "" sends none, whatever LOCKD_TOKEN says.
func WithToken(secret string) Option { return func(c *Client) { c.token, c.tokSet = secret, true } }

// WithHTTPClient sets the HTTP client (default: one with no overall
// timeout, since long-polls last up to the server's maximum wait, whose
// dials and TLS handshakes last at most RetryPolicy.ConnectTimeout; a
// client given here keeps its own).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithLogger sets where the client logs retries and lost sessions
// (default: nowhere).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithRetryPolicy replaces DefaultRetryPolicy; zero fields keep their
// default.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) {
		d := DefaultRetryPolicy
		for _, f := range []struct{ v, def *time.Duration }{
			{&p.MinBackoff, &d.MinBackoff}, {&p.MaxBackoff, &d.MaxBackoff},
			{&p.AttemptTimeout, &d.AttemptTimeout}, {&p.ConnectTimeout, &d.ConnectTimeout},
			{&p.StatusTimeout, &d.StatusTimeout},
		} {
			if *f.v <= 0 {
				*f.v = *f.def
			}
		}
		c.retry = p
	}
}

// EnvAddr is the environment variable New reads when given no endpoints:
// comma-separated host:port or http(s)://host:port addresses.
const EnvAddr = "LOCKD_ADDR"

// New returns a client of the cluster at endpoints (host:port or
// http(s)://host:port; one node is enough, the others are learned from
// it). Without endpoints it reads LOCKD_ADDR. It speaks HTTPS when
// LOCKD_CACERT or LOCKD_CLIENT_CERT and LOCKD_CLIENT_KEY are set. New does
// no I/O: the leader is learned on the first call.
func New(endpoints ...string) (*Client, error) {
	return NewWith(endpoints)
}

// NewWith is New with options; nil or empty endpoints read LOCKD_ADDR,
// and without WithTLS the TLS variables count as in New.
func NewWith(endpoints []string, opts ...Option) (*Client, error) {
	if len(endpoints) == 0 {
		for _, e := range strings.Split(os.Getenv(EnvAddr), ",") {
			if e = strings.TrimSpace(e); e != "" {
				endpoints = append(endpoints, e)
			}
		}
	}
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("lockd client: no endpoints given and %s is empty", EnvAddr)
	}
	c := &Client{
		log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		retry: DefaultRetryPolicy,
		down:  map[string]time.Time{}, silent: map[string]time.Time{},
	}
	c.keeper = &keeper{c: c}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: ownTransport(c.retry.ConnectTimeout)}
	}
	if !c.tokSet {
		c.token = strings.TrimSpace(os.Getenv(EnvToken))
	}
	if !c.tlsSet {
		cfg, err := tlsConfigFromEnv()
		if err != nil {
			return nil, fmt.Errorf("lockd client: %w", err)
		}
		c.tls = cfg
	}
	if c.tls != nil {
		c.hc = withTLS(c.hc, c.tls)
	}
	for _, e := range endpoints {
		base, err := normalizeEndpoint(e, c.tls != nil)
		if err != nil {
			return nil, fmt.Errorf("lockd client: %w", err)
		}
		scheme, _, _ := strings.Cut(base, "://")
		if c.scheme == "" {
			c.scheme = scheme
		}
		if !containsStr(c.endpoints, base) {
			c.endpoints = append(c.endpoints, base)
		}
	}
	return c, nil
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Endpoints returns the base URLs the client knows: the configured ones,
// then members learned from the cluster.
func (c *Client) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.endpoints...)
}

// Leader returns the base URL of the leader as last learned ("" when
// unknown).
func (c *Client) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// Status returns /v1/status of the node the client currently talks to
// (the leader when known).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	if err := c.do(ctx, call{method: "GET", path: "/v1/status", out: &st}); err != nil {
		return nil, fmt.Errorf("lockd status: %w", err)
	}
	return &st, nil
}

// Check reports whether token is still the fencing token of a current
// hold on name (or on an ancestor of name), and the newest such token (0:
// not held). A resource protected by a lock calls it before acting on a
// holder's behalf.
//
// The answer is linearizable: the client asks the leader, which confirms
// its leadership (read-index) before answering, so a token revoked or
// expired before the call is never called valid. It therefore needs a
// leader, and fails over like any call during an election. ctx bounds the
// whole call, retries and failovers included: a resource on its hot path
// should give it a deadline and refuse the holder when it passes. A node
// that takes no connection costs RetryPolicy.ConnectTimeout (1s) before
// the next is tried.
//
// With Stale(), the node the client talks to answers from its own table
// as it is, without a leader; a node cut off from the cluster may then
// call valid a token revoked or expired meanwhile: not for a fencing
// decision.
func (c *Client) Check(ctx context.Context, name string, token uint64, opts ...ReadOption) (valid bool, current uint64, err error) {
	var r struct {
		Valid bool   `json:"valid"`
		Token uint64 `json:"token"`
	}
	q := readQuery(opts)
	q.Set("name", name)
	q.Set("token", strconv.FormatUint(token, 10))
	if err := c.do(ctx, call{method: "GET", path: "/v1/check", query: q, out: &r}); err != nil {
		return false, 0, fmt.Errorf("lockd check %s token %d: %w", name, token, err)
	}
	return r.Valid, r.Token, nil
}

// ReadOption adjusts a read.
type ReadOption func(url.Values)

// Stale reads the answering node's table as it is, without a read-index
// round: it answers without a leader (during an outage) and may miss the
// latest writes.
func Stale() ReadOption { return func(q url.Values) { q.Set("stale", "") } }

func readQuery(opts []ReadOption) url.Values {
	q := url.Values{}
	for _, o := range opts {
		o(q)
	}
	return q
}

// GetLock returns one name's holders and waiters; an error matching
// ErrLockNotFound when nobody holds, waits for or delays it.
func (c *Client) GetLock(ctx context.Context, name string, opts ...ReadOption) (*LockInfo, error) {
	var l LockInfo
	if err := c.do(ctx, call{method: "GET", path: "/v1/locks/" + escapeName(name), query: readQuery(opts), out: &l}); err != nil {
		return nil, fmt.Errorf("lockd get lock %s: %w", name, err)
	}
	return &l, nil
}

// WatchLock is a blocking query of name (GET
// /v1/locks/{name}?index=&wait=): it answers once name's version is above
// index, or once wait has passed (the server caps it), with name's state
// then and its version, the index of the next WatchLock. A wait of 0
// reads at once (a watch's first read). info is nil when nobody holds,
// waits for or delays name: no error, so that a watcher carries on.
func (c *Client) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration, opts ...ReadOption) (info *LockInfo, version uint64, err error) {
	q := readQuery(opts)
	if wait > 0 {
		q.Set("index", strconv.FormatUint(index, 10))
		q.Set("wait", wait.String())
	}
	var l LockInfo
	var h http.Header
	err = c.do(ctx, call{method: "GET", path: "/v1/locks/" + escapeName(name), query: q, out: &l, header: &h, wait: max(wait, 0)})
	free := errors.Is(err, ErrLockNotFound)
	if err != nil && !free {
		return nil, 0, fmt.Errorf("lockd watch lock %s: %w", name, err)
	}
	version, perr := strconv.ParseUint(h.Get("X-Lock-Index"), 10, 64)
	switch {
	case perr == nil && free:
		return nil, version, nil
	case free:
		return nil, 0, fmt.Errorf("lockd watch lock %s: %w (without its version: X-Lock-Index %q)", name, err, h.Get("X-Lock-Index"))
	case perr != nil:
		version = l.Version
	}
	return &l, version, nil
}

// pageSize is how many items the list calls (Locks, Sessions) ask for at
// a time; they follow the cluster's X-Next-After cursor until the last
// page, so the size only trades round trips against answer size.
const pageSize = 1000

// Locks returns every name in use under prefix ("" for all) that the
// token may read, sorted, following the pages of GET /v1/locks.
func (c *Client) Locks(ctx context.Context, prefix string, opts ...ReadOption) ([]LockInfo, error) {
	q := readQuery(opts)
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	all, err := listAll[LockInfo](ctx, c, "/v1/locks", q)
	if err != nil {
		return nil, fmt.Errorf("lockd list locks: %w", err)
	}
	return all, nil
}

// Sessions returns every session the token may see (its own; a management
// token's: all), by id, following the pages of GET /v1/sessions.
func (c *Client) Sessions(ctx context.Context, opts ...ReadOption) ([]SessionInfo, error) {
	all, err := listAll[SessionInfo](ctx, c, "/v1/sessions", readQuery(opts))
	if err != nil {
		return nil, fmt.Errorf("lockd list sessions: %w", err)
	}
	return all, nil
}

// listAll reads a paged list: limit=pageSize, then after= the answer's
// X-Next-After until an answer has none. Pages are separate reads: an
// item added or removed meanwhile may be missed or seen once more.
func listAll[T any](ctx context.Context, c *Client, path string, q url.Values) ([]T, error) {
	var all []T
	q.Set("limit", strconv.Itoa(pageSize))
	for after := ""; ; {
		if after != "" {
			q.Set("after", after)
		}
		var page []T
		var h http.Header
		if err := c.do(ctx, call{method: "GET", path: path, query: q, out: &page, header: &h}); err != nil {
			return nil, err
		}
		all = append(all, page...)
		next := h.Get("X-Next-After")
		if next == "" || next == after {
			if all == nil {
				all = []T{}
			}
			return all, nil
		}
		after = next
	}
}

// GetSession returns a session as the cluster sees it; an error matching
// ErrSessionNotFound when it is gone.
func (c *Client) GetSession(ctx context.Context, id string) (*SessionInfo, error) {
	var s SessionInfo
	if err := c.do(ctx, call{method: "GET", path: "/v1/sessions/" + url.PathEscape(id), out: &s}); err != nil {
		return nil, fmt.Errorf("lockd get session %s: %w", id, err)
	}
	return &s, nil
}

// escapeName escapes each segment of a lock name for a URL path.
func escapeName(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
