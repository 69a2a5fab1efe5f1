package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// retryClass says when a call may be sent again after a failure.
type retryClass int

const (
	// retrySafe: sending the call twice has the effect of sending it once
	// (reads, keepalives, acquires with a request_id, cancels, session
	// deletes), so it is retried on any transport error and on 503.
	retrySafe retryClass = iota
	// retryUnsent: a second copy could act twice (a release counts a
	// reentrant hold down again; a surrender re-queues). It is retried
	// only when the request provably did nothing: the dial failed, or the
	// server answered 503 not_applied (no leader took it: a node that is
	// shutting down says so); otherwise the error wraps
	// ErrUnknownOutcome.
	retryUnsent
	// retryNever: one attempt; the caller handles every failure (the
	// first POST of an acquire, which re-attaches by request id instead).
	retryNever
)

// call is one API call.
type call struct {
	method, path string
	query        url.Values
	body         any
	out          any
	retry        retryClass
	// wait is how long the server may legitimately hold the call (a
	// long-poll); it extends the per-attempt timeout.
	wait time.Duration
	// attempt, when set, replaces RetryPolicy.AttemptTimeout: keepalives
	// must fail over from a hung node well within the session's TTL.
	attempt time.Duration
	// header, when set, receives the headers of the answer, an error
	// answer's too (X-Next-After, a list's cursor; X-Lock-Index, a
	// lock's version, also of a lock nobody holds).
	header *http.Header
}

// do sends c to the leader (or, while the leader is unknown, to the next
// endpoint), failing over and backing off according to the call's retry
// class and the client's RetryPolicy. Once every endpoint has either
// refused the connection or answered that it lost its quorum, do returns
// that answer without waiting out the policy: no node it reaches can
// elect a leader.
func (cl *Client) do(ctx context.Context, c call) error {
	start := time.Now()
	var last, answer error // answer: the last no_leader a node gave, the cluster's own reason
	var out outage
	for attempt := 0; ; attempt++ {
		cl.ensureLeader(ctx)
		target := cl.target()
		err := cl.send(ctx, target, c)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return cmp.Or(answer, err)
		}
		var ae *Error
		isAPI := errors.As(err, &ae)
		if (isAPI && !retryable(ae.Code)) || isTLSRefusal(err) || errors.Is(err, ErrHTTPSRequired) {
			return err // a definite answer
		}
		// The node failed us (down, unreachable, without a leader, or
		// diverged): forget it as the leader and move on to another
		// endpoint.
		cl.failed(target, isAPI)
		last = err
		if isAPI {
			answer = err
		}
		unsent := !isAPI && isDialError(err) || isAPI && ae.NotApplied
		retry := c.retry == retrySafe || (c.retry == retryUnsent && unsent)
		if !retry {
			if c.retry == retryUnsent {
				return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
			}
			return err
		}
		if out.note(target, err) && out.total(cl.endpointList()) {
			return answer // every node reached has lost its quorum
		}
		if cl.retry.MaxElapsed > 0 && time.Since(start) >= cl.retry.MaxElapsed {
			return fmt.Errorf("giving up after %d attempts in %v: %w", attempt+1,
				time.Since(start).Round(time.Millisecond), cmp.Or(answer, last))
		}
		cl.log.Debug("lockd client: retrying", "method", c.method, "path", c.path, "node", target,
			"attempt", attempt+1, "err", err)
		if err := sleep(ctx, cl.pause(ctx, attempt, ae)); err != nil {
			return cmp.Or(answer, last)
		}
	}
}

// send makes one attempt of c against base ("http://host:port").
func (cl *Client) send(ctx context.Context, base string, c call) error {
	timeout := cl.retry.AttemptTimeout
	if c.attempt > 0 {
		timeout = c.attempt
	}
	actx, cancel := context.WithTimeout(ctx, timeout+c.wait)
	defer cancel()
	var body io.Reader
	if c.body != nil {
		b, err := json.Marshal(c.body)
		if err != nil {
			return fmt.Errorf("%s %s: encoding request: %w", c.method, c.path, err)
		}
		body = bytes.NewReader(b)
	}
	u := base + c.path
	if len(c.query) > 0 {
		u += "?" + c.query.Encode()
	}
	req, err := http.NewRequestWithContext(actx, c.method, u, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.method, c.path, err)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.token)
	}
	resp, err := cl.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", c.method, c.path, base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20)) // a session closed with 100k holds lists them all
	if err != nil {
		return fmt.Errorf("%s %s on %s: reading answer: %w", c.method, c.path, base, err)
	}
	if c.header != nil {
		*c.header = resp.Header
	}
	if resp.StatusCode/100 != 2 && resp.TLS == nil && httpsRequired(resp.StatusCode, b) {
		return fmt.Errorf("%s: %w", base, ErrHTTPSRequired)
	}
	if resp.StatusCode/100 != 2 {
		e := decodeError(resp.StatusCode, b)
		e.RetryAfter = retryAfterOf(resp.Header)
		return e
	}
	if c.out != nil {
		if err := json.Unmarshal(b, c.out); err != nil {
			return fmt.Errorf("%s %s on %s: decoding %.200q: %w", c.method, c.path, base, b, err)
		}
	}
	return nil
}

// decodeError turns a non-2xx answer into an *Error. A gateway error
// without a lockd body (a proxy in front of a dead node) counts as
// no_leader so that it is retried like one.
func decodeError(status int, b []byte) *Error {
	var eb wire.ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error.Code != "" {
		return &Error{Code: eb.Error.Code, Message: eb.Error.Message, HTTPStatus: status,
			NotApplied: eb.Error.NotApplied, QuorumLost: eb.Error.QuorumLost}
	}
	code := wire.CodeInternal
	if status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout {
		code = wire.CodeNoLeader
	}
	return &Error{Code: code, Message: fmt.Sprintf("HTTP %d without a lockd error body: %.200q", status, b),
		HTTPStatus: status}
}

// sharedTransports are the clients' own transports by connect timeout:
// clients share their connections, as they did http.DefaultTransport's.
var sharedTransports sync.Map // time.Duration -> *http.Transport

// ownTransport is the transport of a client without WithHTTPClient: the
// settings of http.DefaultTransport, but a dial and a TLS handshake
// bounded by the connect timeout d, so that a node that takes no
// connection costs d, not the attempt's whole timeout. A dial that
// times out is a dial error: nothing was sent, and any call may go to
// another node.
func ownTransport(d time.Duration) *http.Transport {
	if t, ok := sharedTransports.Load(d); ok {
		return t.(*http.Transport)
	}
	t, _ := sharedTransports.LoadOrStore(d, &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: d, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   d,
		ExpectContinueTimeout: time.Second,
	})
	return t.(*http.Transport)
}

// isDialError reports whether err happened before the request was sent.
func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// backoff is the pause before retry attempt+1: exponential from
// MinBackoff, capped at MaxBackoff, with up to 50% jitter so that many
// clients failing over together spread out.
func (cl *Client) backoff(attempt int) time.Duration {
	d := cl.retry.MinBackoff << min(attempt, 16)
	if d <= 0 || d > cl.retry.MaxBackoff {
		d = cl.retry.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// pause is the wait before retry attempt+1: the backoff, or at least
// the Retry-After of the node's answer ae (nil: none), with up to 50%
// jitter, so that a herd of clients a node turned away comes back spread
// out. It leaves the call at least half its remaining time, so that a
// keepalive still has one attempt before its session's deadline.
func (cl *Client) pause(ctx context.Context, attempt int, ae *Error) time.Duration {
	d := cl.backoff(attempt)
	if ae != nil && ae.RetryAfter > 0 {
		d = max(d, ae.RetryAfter+rand.N(ae.RetryAfter/2+1))
	}
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline)/2)
	}
	return d
}

// retryAfterOf reads a Retry-After of whole seconds (the form lockd
// sends); 0 when there is none.
func retryAfterOf(h http.Header) time.Duration {
	s, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || s <= 0 {
		return 0
	}
	return time.Duration(min(s, 3600)) * time.Second
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// outage is what the endpoints said during one call: which have no
// quorum (a no_leader answer with quorum_lost) and which refused the
// connection.
type outage struct {
	lost, down map[string]bool
}

// note records base's failure err and reports whether it was a
// quorum-lost answer or a refused connection; any other failure takes
// back what base said before.
func (o *outage) note(base string, err error) bool {
	var ae *Error
	delete(o.lost, base)
	delete(o.down, base)
	switch {
	case errors.As(err, &ae) && ae.Code == wire.CodeNoLeader && ae.QuorumLost:
		if o.lost == nil {
			o.lost = map[string]bool{}
		}
		o.lost[base] = true
	case isDialError(err):
		if o.down == nil {
			o.down = map[string]bool{}
		}
		o.down[base] = true
	default:
		return false
	}
	return true
}

// total reports whether the outage covers every endpoint: each one
// answered that it lost its quorum or refused the connection, and at
// least one answered.
func (o *outage) total(endpoints []string) bool {
	if len(o.lost) == 0 {
		return false
	}
	for _, e := range endpoints {
		if !o.lost[e] && !o.down[e] {
			return false
		}
	}
	return true
}

// ---- leader tracking -------------------------------------------------

// endpointList is a copy of the endpoints known now.
func (cl *Client) endpointList() []string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return slices.Clone(cl.endpoints)
}

// suspectFor is how long an endpoint that failed a call is avoided, and
// not believed when other nodes still name it leader (they do until
// their own election timeout passes).
const suspectFor = 2 * time.Second

// target returns where the next call goes: the leader when known, else
// the next endpoint that has not failed recently.
func (cl *Client) target() string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.leader != "" {
		return cl.leader
	}
	now := time.Now()
	for i := range cl.endpoints {
		e := cl.endpoints[(cl.next+i)%len(cl.endpoints)]
		if now.After(cl.down[e]) {
			return e
		}
	}
	return cl.endpoints[cl.next%len(cl.endpoints)]
}

// failed notes that base did not serve a call; answered says whether it
// gave an answer (a 503) rather than none.
func (cl *Client) failed(base string, answered bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.leader == base {
		cl.leader = ""
	}
	cl.learned = false // the next call learns the leader again
	cl.down[base] = time.Now().Add(suspectFor)
	if answered {
		delete(cl.silent, base)
	} else {
		cl.silent[base] = cl.down[base]
	}
	for i, e := range cl.endpoints {
		if e == base {
			cl.next = i + 1
			return
		}
	}
	cl.next++
}

// relearnEvery is how often calls look for the leader again while it is
// unknown (during and just after an election).
const relearnEvery = 500 * time.Millisecond

// ensureLeader learns the leader before the first call, after a call
// failed, and now and then while the leader is unknown.
func (cl *Client) ensureLeader(ctx context.Context) {
	cl.mu.Lock()
	need := !cl.learned || (cl.leader == "" && time.Since(cl.learnedAt) > relearnEvery)
	cl.mu.Unlock()
	if need {
		cl.learnLeader(ctx)
	}
}

// learnLeader asks the endpoints, starting with the next one, for
// /v1/status and remembers the first leader named (and every member's
// address, as more endpoints to fail over to). An endpoint that gave a
// call no answer within suspectFor is not asked: a dead node would cost a
// connect timeout (or a hung one an attempt) again. It gives up quietly:
// calls then go to the endpoints in turn, which forward to the leader.
func (cl *Client) learnLeader(ctx context.Context) {
	cl.mu.Lock()
	eps := append([]string(nil), cl.endpoints...)
	first := cl.next
	cl.learned, cl.learnedAt = true, time.Now()
	silent := map[string]bool{}
	for e, until := range cl.silent {
		silent[e] = cl.learnedAt.Before(until)
	}
	cl.mu.Unlock()
	for i := range eps {
		base := eps[(first+i)%len(eps)]
		if silent[base] {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, cl.retry.StatusTimeout)
		var st Status
		err := cl.send(sctx, base, call{method: "GET", path: "/v1/status", out: &st})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		cl.mu.Lock()
		for _, m := range st.Members {
			cl.addEndpointLocked(m.HTTPAddr)
		}
		if lb := cl.baseURL(st.Leader.HTTPAddr); st.Leader.HTTPAddr != "" && time.Now().After(cl.down[lb]) {
			cl.leader = lb
			cl.addEndpointLocked(st.Leader.HTTPAddr)
			cl.mu.Unlock()
			cl.log.Debug("lockd client: leader learned", "leader", st.Leader.ID, "addr", st.Leader.HTTPAddr, "via", base)
			return
		}
		cl.mu.Unlock()
	}
}

// addEndpointLocked adds a host:port learned from the cluster.
func (cl *Client) addEndpointLocked(hostport string) {
	if hostport == "" {
		return
	}
	base := cl.baseURL(hostport)
	for _, e := range cl.endpoints {
		if e == base {
			return
		}
	}
	cl.endpoints = append(cl.endpoints, base)
}

// baseURL turns a host:port the cluster reports into a base URL with the
// scheme of the configured endpoints.
func (cl *Client) baseURL(hostport string) string {
	return cl.scheme + "://" + hostport
}

// normalizeEndpoint accepts "host:port" or "http(s)://host:port[/]"; with
// useTLS the base URL is https whatever the scheme given.
func normalizeEndpoint(ep string, useTLS bool) (string, error) {
	ep = strings.TrimSpace(ep)
	if ep == "" {
		return "", errors.New("empty endpoint")
	}
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: %w", ep, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("endpoint %q: want host:port or http(s)://host:port", ep)
	}
	if useTLS {
		u.Scheme = "https"
	}
	return u.Scheme + "://" + u.Host, nil
}
