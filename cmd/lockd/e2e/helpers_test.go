//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
)

// ---- processes and clusters ---------------------------------------------

// node is one lockd process: its flags, data dir and log survive restarts.
type node struct {
	id, dataDir, logPath       string
	dir                        string // the process's working directory; "" for the test's
	httpAddr, raftAddr, gossip string
	args                       []string
	mu                         sync.Mutex
	cmd                        *exec.Cmd     // nil when not running
	exited                     chan struct{} // closed when cmd has been waited for
	starts                     int
	unexpectedExits            []string // exits the test did not cause
}

// cluster is n lockd processes started with --bootstrap-expect n.
type cluster struct {
	t     *testing.T
	nodes []*node
	api   *client
}

// raftTiming is every node's --raft-timing: production's, unless
// LOCKD_TEST_TIMING says otherwise.
func raftTiming() string { return lockdtest.TimingFlag(1) }

// raftLogArgs is --raft-log $LOCKD_E2E_RAFT_LOG when it is set (bolt:
// the tests on the store of older data dirs), nothing otherwise (the
// default, raft-wal).
func raftLogArgs() []string {
	if v := os.Getenv("LOCKD_E2E_RAFT_LOG"); v != "" {
		return []string{"--raft-log", v}
	}
	return nil
}

func logLevel() string {
	if v := os.Getenv("LOCKD_E2E_LOG_LEVEL"); v != "" {
		return v
	}
	return "info"
}

// startCluster starts n nodes n1..nN that all --join each other with
// --bootstrap-expect n. It does not wait for a leader.
func startCluster(t *testing.T, n int, extra ...string) *cluster {
	t.Helper()
	return startClusterWith(t, n, newClient(), nil, extra...)
}

// startClusterWith is startCluster with the client the test talks to the
// nodes with, and flags of each node's own (nodeArgs, if not nil).
func startClusterWith(t *testing.T, n int, api *client, nodeArgs func(id string) []string, extra ...string) *cluster {
	t.Helper()
	needBinary(t)
	dir := t.TempDir() // removed after the processes are killed (cleanups run LIFO)
	ports := lockdtest.FreePorts(t, 3*n)
	c := &cluster{t: t, api: api}
	var gossip []string
	for i := range n {
		gossip = append(gossip, fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]))
	}
	for i := range n {
		nd := &node{
			id:       fmt.Sprintf("n%d", i+1),
			httpAddr: fmt.Sprintf("127.0.0.1:%d", ports[3*i]),
			raftAddr: fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]),
			gossip:   gossip[i],
		}
		nd.dataDir = filepath.Join(dir, nd.id)
		nd.logPath = filepath.Join(dir, nd.id+".log")
		var others []string
		for j, g := range gossip {
			if j != i {
				others = append(others, g)
			}
		}
		nd.args = append([]string{
			"--node-id", nd.id, "--data-dir", nd.dataDir,
			"--http-addr", nd.httpAddr, "--raft-addr", nd.raftAddr, "--gossip-addr", nd.gossip,
			"--join", strings.Join(others, ","), "--bootstrap-expect", strconv.Itoa(n),
			"--raft-timing", raftTiming(), "--log-level", logLevel(),
		}, append(raftLogArgs(), extra...)...)
		if nodeArgs != nil {
			nd.args = append(nd.args, nodeArgs(nd.id)...)
		}
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(c.cleanup)
	for _, nd := range c.nodes {
		c.start(nd)
	}
	return c
}

// start starts (or restarts, with the same flags and data dir) a node.
func (c *cluster) start(nd *node) {
	c.t.Helper()
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil {
		c.t.Fatalf("start %s: already running", nd.id)
	}
	logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatalf("start %s: %v", nd.id, err)
	}
	defer logf.Close() // the child has its own copy of the descriptor
	nd.starts++
	fmt.Fprintf(logf, "===== e2e: start #%d of %s at %s: lockd %s\n", nd.starts, nd.id,
		time.Now().Format(time.RFC3339Nano), strings.Join(nd.args, " "))
	cmd := exec.Command(lockdBin, nd.args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, nd.dir
	if err := lockdtest.Start(cmd); err != nil {
		c.t.Fatalf("start %s: %v", nd.id, err)
	}
	exited := make(chan struct{})
	nd.cmd, nd.exited = cmd, exited
	go func() {
		err := cmd.Wait()
		lockdtest.Exited(cmd)
		nd.mu.Lock()
		if nd.cmd == cmd { // not killed by the test
			nd.cmd = nil
			nd.unexpectedExits = append(nd.unexpectedExits,
				fmt.Sprintf("%s exited by itself at %s: %v", nd.id, time.Now().Format(time.RFC3339Nano), err))
		}
		nd.mu.Unlock()
		close(exited)
	}()
}

// kill SIGKILLs a node and waits until the process is gone.
func (c *cluster) kill(nd *node) {
	c.t.Helper()
	if err := nd.kill(10 * time.Second); err != nil {
		c.t.Fatal(err)
	}
	c.api.tr.CloseIdleConnections()
}

// exits tells the cluster that nd is about to exit by itself (it was
// asked to leave); the returned channel is closed once it has.
func (nd *node) exits() <-chan struct{} {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	nd.cmd = nil
	return nd.exited
}

func (nd *node) kill(within time.Duration) error {
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	nd.cmd = nil
	nd.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
		return nil
	case <-time.After(within):
		return fmt.Errorf("kill %s (pid %d): still running %v after SIGKILL", nd.id, cmd.Process.Pid, within)
	}
}

// cleanup kills every process of the cluster and, if the test failed
// (or LOCKD_E2E_LOGS is set), prints the tail of every node's log.
func (c *cluster) cleanup() {
	for _, nd := range c.nodes {
		if err := nd.kill(10 * time.Second); err != nil {
			c.t.Error(err)
		}
	}
	c.api.tr.CloseIdleConnections()
	for _, nd := range c.nodes {
		nd.mu.Lock()
		msgs := nd.unexpectedExits
		nd.mu.Unlock()
		for _, m := range msgs {
			c.t.Errorf("node %s", m)
		}
	}
	if c.t.Failed() || os.Getenv("LOCKD_E2E_LOGS") != "" {
		for _, nd := range c.nodes {
			c.t.Logf("---- last lines of %s (%s) ----\n%s", nd.id, nd.httpAddr, lockdtest.Tail(nd.logPath, 60))
		}
	}
}

// others returns the nodes of c except those given.
func (c *cluster) others(except ...*node) []*node {
	var out []*node
	for _, nd := range c.nodes {
		if !slices.Contains(except, nd) {
			out = append(out, nd)
		}
	}
	return out
}

func (c *cluster) byID(id string) *node {
	for _, nd := range c.nodes {
		if nd.id == id {
			return nd
		}
	}
	return nil
}

func ids(nodes []*node) []string {
	var out []string
	for _, nd := range nodes {
		out = append(out, nd.id)
	}
	return out
}

// ---- polling ------------------------------------------------------------

// eventually polls cond every 50ms until it returns true or timeout passes;
// then it fails the test with what cond last said.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if detail != "" {
			last = detail
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, timeout, last)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: test context done", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// statuses asks every given node for /v1/status concurrently.
func (c *cluster) statuses(nodes []*node) ([]*statusView, error) {
	out := make([]*statusView, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(c.t.Context(), 3*time.Second)
			defer cancel()
			out[i], errs[i] = c.api.status(ctx, nd.httpAddr)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", nd.id, errs[i])
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// waitLeader waits until exactly one of nodes says it is the leader and
// every one of them names it as leader, and returns it.
func (c *cluster) waitLeader(nodes []*node, timeout time.Duration) *node {
	c.t.Helper()
	var leader *node
	eventually(c.t, timeout, fmt.Sprintf("one leader agreed on by %v", ids(nodes)), func() (bool, string) {
		sts, err := c.statuses(nodes)
		if err != nil {
			return false, err.Error()
		}
		var leaders []string
		views := map[string]string{}
		for i, st := range sts {
			if st.State == "leader" {
				leaders = append(leaders, nodes[i].id)
			}
			views[nodes[i].id] = st.State + "/leader=" + st.Leader.ID
		}
		if len(leaders) != 1 {
			return false, fmt.Sprintf("leaders %v, views %v", leaders, views)
		}
		for _, st := range sts {
			if st.Leader.ID != leaders[0] {
				return false, fmt.Sprintf("views %v", views)
			}
		}
		leader = c.byID(leaders[0])
		if leader == nil {
			return false, "leader " + leaders[0] + " is not a node of this cluster"
		}
		return true, ""
	})
	return leader
}

// waitConverged waits until the given nodes have converged and returns
// their common status. Converged: after a linearizable read on each (so
// that each has applied every write acknowledged before), all report the
// same commit_index, the same applied_index and so the same digest. The
// commit index is not compared with the applied index: that counts only
// the table's entries, not raft's own (a new leader's no-op, a
// configuration change), so every election leaves it below. Different
// digests at the same applied index fail the test at once.
func (c *cluster) waitConverged(nodes []*node, timeout time.Duration) *statusView {
	c.t.Helper()
	var common *statusView
	eventually(c.t, timeout, fmt.Sprintf("%v converged", ids(nodes)), func() (bool, string) {
		if err := c.fence(nodes); err != nil {
			return false, err.Error()
		}
		sts, err := c.statuses(nodes)
		if err != nil {
			return false, err.Error()
		}
		var desc []string
		same := true
		for i, st := range sts {
			desc = append(desc, fmt.Sprintf("%s commit=%d applied=%d digest=%.12s", nodes[i].id, st.CommitIndex,
				st.AppliedIndex, st.Digest))
			same = same && st.CommitIndex == sts[0].CommitIndex && st.AppliedIndex == sts[0].AppliedIndex
		}
		if !same {
			return false, strings.Join(desc, "; ")
		}
		for i, st := range sts {
			if st.Digest == "" || st.Digest != sts[0].Digest {
				c.t.Fatalf("digest mismatch at applied_index %d: %s vs %s: %s", st.AppliedIndex, nodes[0].id,
					nodes[i].id, strings.Join(desc, "; "))
			}
		}
		common = sts[0]
		return true, ""
	})
	return common
}

// fence makes a linearizable read on every given node: once it answers,
// the node has applied every write acknowledged before.
func (c *cluster) fence(nodes []*node) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(c.t.Context(), callTimeout)
			defer cancel()
			if err := c.api.do(ctx, "GET", nd.httpAddr, "/v1/locks?limit=1", nil, nil); err != nil {
				errs[i] = fmt.Errorf("linearizable read on %s: %w", nd.id, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ---- HTTP client ----------------------------------------------------------

// callTimeout bounds one ordinary API call: a node retries internally for
// up to 3 × (heartbeat + election) while there is no leader (6s at timing 1).
const callTimeout = 20 * time.Second

// apiError is a non-2xx answer.
type apiError struct {
	Status  int
	Code    string
	Message string
	// NotApplied and QuorumLost are the answer's not_applied and
	// quorum_lost (docs/api.md).
	NotApplied, QuorumLost bool
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message) }

// errCode returns the API error code of err ("" for transport errors).
func errCode(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

type client struct {
	tr     *http.Transport
	hc     *http.Client
	scheme string
	token  string // ACL secret sent as a bearer token; "" for none
	// once: every request is sent once and its answer returned as it
	// is, neither resent nor settled (the outage tests assert what one
	// answer says).
	once bool
}

// as returns a client that sends token, sharing c's connections.
func (c *client) as(token string) *client {
	cc := *c
	cc.token = token
	return &cc
}

// sendOnce returns a client that sends each request once, sharing c's
// connections.
func (c *client) sendOnce() *client {
	cc := *c
	cc.once = true
	return &cc
}

func newClient() *client { return newTLSClient(nil) }

// newTLSClient talks HTTPS with conf, or plain HTTP when conf is nil.
func newTLSClient(conf *tls.Config) *client {
	tr := &http.Transport{
		Proxy:               nil, // loopback only, never a proxy
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
		TLSClientConfig:     conf,
	}
	scheme := "http"
	if conf != nil {
		scheme = "https"
	}
	return &client{tr: tr, hc: &http.Client{Transport: tr}, scheme: scheme}
}

// do sends a JSON request to addr+path and decodes a 2xx answer into
// out; other answers come back as *apiError. An answer that may be sent
// again as it is (resendable) is, until ctx ends, unless c sends once.
func (c *client) do(ctx context.Context, method, addr, path string, in, out any) error {
	var last error
	for {
		err := c.send(ctx, method, addr, path, in, out)
		if err != nil && ctx.Err() != nil && last != nil {
			// Cut off while resending: the node's own answer says more.
			return fmt.Errorf("%w (sent again until the call's deadline)", last)
		}
		if c.once || !resendable(method, err) {
			return err
		}
		last = err
		if !pause(ctx) {
			return fmt.Errorf("%w (sent again until the call's deadline)", last)
		}
	}
}

// send makes one attempt of do.
func (c *client) send(ctx context.Context, method, addr, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+addr+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb struct {
			Error struct {
				Code, Message string
				NotApplied    bool `json:"not_applied"`
				QuorumLost    bool `json:"quorum_lost"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" {
			return &apiError{Status: resp.StatusCode, Message: fmt.Sprintf("non-JSON error body %q", b)}
		}
		e := eb.Error
		return &apiError{Status: resp.StatusCode, Code: e.Code, Message: e.Message, NotApplied: e.NotApplied, QuorumLost: e.QuorumLost}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decoding %q: %w", method, path, b, err)
		}
	}
	return nil
}

type statusView struct {
	NodeID string `json:"node_id"`
	State  string `json:"state"`
	Leader struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"http_addr"`
	} `json:"leader"`
	Term         uint64       `json:"term"`
	CommitIndex  uint64       `json:"commit_index"`
	AppliedIndex uint64       `json:"applied_index"`
	Digest       string       `json:"digest"`
	Members      []memberView `json:"members"`
	QuorumLost   bool         `json:"quorum_lost"`
	Quorum       struct {
		Voters    int      `json:"voters"`
		Reachable []string `json:"reachable"`
		Needed    int      `json:"needed"`
	} `json:"quorum"`
}

type memberView struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
	Status   string `json:"status"`
}

type grantView struct {
	Name  string `json:"name"`
	Mode  string `json:"mode"`
	Token uint64 `json:"token"`
}

type acquireView struct {
	Status    string      `json:"status"`
	RequestID string      `json:"request_id"`
	Session   string      `json:"session"`
	Token     uint64      `json:"token"`
	Granted   []grantView `json:"granted"`
}

type holderView struct {
	Session string `json:"session"`
	Mode    string `json:"mode"`
	Count   int    `json:"count"`
	Token   uint64 `json:"token"`
}

type waiterView struct {
	Session   string `json:"session"`
	RequestID string `json:"request_id"`
}

type lockView struct {
	Name    string       `json:"name"`
	Version uint64       `json:"version"`
	Holders []holderView `json:"holders"`
	Waiters []waiterView `json:"waiters"`
}

type requestView struct {
	RequestID string `json:"request_id"`
	Session   string `json:"session"`
	Status    string `json:"status"`
	Token     uint64 `json:"token"`
	Created   uint64 `json:"created"`
	Ended     uint64 `json:"ended"`
}

type sessionView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	TTL  string `json:"ttl"`
	Held []struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
		Token uint64 `json:"token"`
	} `json:"held"`
	Pending []string         `json:"pending"`
	Revoked []revocationView `json:"revoked"`
}

type revocationView struct {
	Name  string `json:"name"`
	Token uint64 `json:"token"`
}

func staleQ(stale bool) string {
	if stale {
		return "?stale"
	}
	return ""
}

func (c *client) status(ctx context.Context, addr string) (*statusView, error) {
	var st statusView
	return &st, c.do(ctx, "GET", addr, "/v1/status", nil, &st)
}

func (c *client) keepalive(ctx context.Context, addr, id string) error {
	return c.do(ctx, "POST", addr, "/v1/sessions/"+id+"/keepalive", nil, nil)
}

func (c *client) getSession(ctx context.Context, addr, id string, stale bool) (*sessionView, error) {
	var s sessionView
	return &s, c.do(ctx, "GET", addr, "/v1/sessions/"+id+staleQ(stale), nil, &s)
}

func (c *client) getLock(ctx context.Context, addr, name string, stale bool) (*lockView, error) {
	var l lockView
	return &l, c.do(ctx, "GET", addr, "/v1/locks/"+name+staleQ(stale), nil, &l)
}

// getRequest reads a request; wait != "" long-polls until it is no longer
// pending (or wait runs out).
func (c *client) getRequest(ctx context.Context, addr, id, wait string, stale bool) (*requestView, error) {
	q := url.Values{}
	if wait != "" {
		q.Set("wait", wait)
	}
	path := "/v1/requests/" + id
	if enc := q.Encode(); enc != "" {
		path += "?" + enc
		if stale {
			path += "&stale"
		}
	} else {
		path += staleQ(stale)
	}
	var r requestView
	return &r, c.do(ctx, "GET", addr, path, nil, &r)
}

// call runs f with a context bounded by callTimeout.
func call[T any](t *testing.T, f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	return f(ctx)
}

// must runs f within callTimeout and fails the test on error (the
// client has resent or settled what it may: settle_test.go).
func must[T any](t *testing.T, what string, f func(ctx context.Context) (T, error)) T {
	t.Helper()
	v, err := call(t, f)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// acquireResult is the outcome of an acquire run in the background.
type acquireResult struct {
	a    *acquireView
	err  error
	took time.Duration
}

// goAcquire runs a waiting acquire in the background; the context of the
// test bounds it.
func (c *client) goAcquire(t *testing.T, addr, session, requestID, name, wait string) <-chan acquireResult {
	w, err := time.ParseDuration(wait)
	if err != nil {
		t.Fatalf("goAcquire wait %q: %v", wait, err)
	}
	ch := make(chan acquireResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), w+callTimeout)
		defer cancel()
		start := time.Now()
		a, err := c.acquire(ctx, addr, session, requestID, name, wait)
		ch <- acquireResult{a, err, time.Since(start)}
	}()
	return ch
}

// recvAcquire waits for a background acquire's outcome.
func recvAcquire(t *testing.T, ch <-chan acquireResult, timeout time.Duration, what string) acquireResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(timeout):
		t.Fatalf("%s: no answer within %v", what, timeout)
	}
	panic("unreachable")
}

// ---- keepalives -----------------------------------------------------------

// keeper sends keepalives for a session every interval to addrs[0],
// moving on to the next address after a failure.
type keeper struct {
	c        *client
	id       string
	addrs    []string
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}

	mu          sync.Mutex
	oks         []time.Time // when each successful keepalive was answered
	fails       int
	consecutive int
	maxConsec   int
	notFound    bool // the session was reported gone: expired
	lastErr     error
	history     []string // every keepalive: when, where, how long, outcome
}

// keepAlive starts a keeper; t.Cleanup stops it.
func (c *client) keepAlive(t *testing.T, id string, interval time.Duration, addrs ...string) *keeper {
	ctx, cancel := context.WithCancel(t.Context())
	k := &keeper{c: c, id: id, addrs: addrs, interval: interval, cancel: cancel, done: make(chan struct{})}
	go k.run(ctx)
	t.Cleanup(k.stop)
	return k
}

func (k *keeper) run(ctx context.Context) {
	defer close(k.done)
	next := 0
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		addr, start := k.addrs[next%len(k.addrs)], time.Now()
		err := k.c.keepalive(cctx, addr, k.id)
		cancel()
		if ctx.Err() != nil {
			return
		}
		delay := k.interval
		k.mu.Lock()
		k.history = append(k.history, fmt.Sprintf("%s %s %v: %v", start.Format("15:04:05.000"), addr,
			time.Since(start).Round(time.Millisecond), err))
		if err == nil {
			k.oks = append(k.oks, time.Now())
			k.consecutive = 0
		} else {
			k.fails++
			k.consecutive++
			k.maxConsec = max(k.maxConsec, k.consecutive)
			k.lastErr = err
			next++
			delay = min(250*time.Millisecond, k.interval)
			if errCode(err) == "session_not_found" {
				k.notFound = true
			}
		}
		gone := k.notFound
		k.mu.Unlock()
		if gone {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// stop ends the keepalives and waits for the loop to finish.
func (k *keeper) stop() {
	k.cancel()
	<-k.done
}

// okSince counts successful keepalives answered after t.
func (k *keeper) okSince(t time.Time) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, at := range k.oks {
		if at.After(t) {
			n++
		}
	}
	return n
}

// log returns the keepalive history, one line per keepalive.
func (k *keeper) log() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.Join(k.history, "\n")
}

type keeperStats struct {
	oks, fails, maxConsecutive int
	notFound                   bool
	lastErr                    error
}

func (k *keeper) stats() keeperStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return keeperStats{len(k.oks), k.fails, k.maxConsec, k.notFound, k.lastErr}
}

// addrs returns the HTTP addresses of nodes.
func addrs(nodes ...*node) []string {
	var out []string
	for _, nd := range nodes {
		out = append(out, nd.httpAddr)
	}
	return out
}
