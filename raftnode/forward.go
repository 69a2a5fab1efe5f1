package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// The internal protocol, on the node port (transport.go): msgpack bodies,
// one POST per call, answered with a wireReply. A node answers only for
// itself and never forwards a forwarded request, so there are no
// forwarding loops: when it is not the (ready) leader it says so and the
// caller looks for the leader again.
const (
	pathPropose   = "/internal/v1/propose"   // body: the bare command at now 0 (see forwardPropose)
	pathReadIndex = "/internal/v1/readindex" // empty body
	pathKeepAlive = "/internal/v1/keepalive" // body: keepAliveRequest
	// pathKeepAlives: body keepAliveRequest with Sessions; answered with
	// TTLs. A leader of an older build answers 404 (forwardKeepAliveMany).
	pathKeepAlives = "/internal/v1/keepalives"
	pathRemove     = "/internal/v1/remove" // body: removeRequest
	pathDigest     = "/internal/v1/digest" // empty body; answered by any node for itself
	pathAwait      = "/internal/v1/await"  // body: awaitRequest; answered by any node for itself (await.go)

	contentType     = "application/msgpack"
	headerForwarder = "X-Lockd-Forwarded-By"
	// maxRequestBody bounds an internal call's body: a command, or less.
	maxRequestBody = MaxEntryBytes + 1024
	// forwardTimeout bounds a forwarded call whose context has no deadline.
	forwardTimeout = 30 * time.Second
	// forwardConns bounds a node's connections to one peer for forwarded
	// proposals, controlConns those for its other calls (keepalives,
	// read-index, removals, digests: a stalled commit holding every
	// proposal connection must not starve keepalives), awaitConns those
	// for waits on the leader (await.go). Together they stay under the
	// leader's maxPendingPerHost, so that a burst through one node is
	// queued here rather than refused there.
	forwardConns = 24
	controlConns = 8
	awaitConns   = 16
)

// Reply codes of the internal protocol.
const (
	codeNotLeader       = "not_leader"      // nothing was done; find the leader and retry
	codeUnknownOutcome  = "unknown_outcome" // the command may have committed
	codeSessionNotFound = "session_not_found"
	codeRemoveLeader    = "remove_leader"
	codeMemberAlive     = "member_alive"
	codeTooLarge        = "answer_too_large" // applied, but the answer is over maxReplyBody
	// codeNotMember: the caller is not (yet, or no longer) a server of the
	// leader's configuration; nothing was done. A node that is joining
	// asks again once the leader has added it.
	codeNotMember = "not_member"
	codeError     = "error"
)

// maxReplyBody bounds an internal answer. Answers come from an
// authenticated member and are as large as their results: closing a
// session lists every name it held (100k holds of long names are tens of
// megabytes). The bound only stops a broken peer from filling memory; a
// leader never sends more (writeReply), and a reply cut short is an
// ErrAnswerLost, never an unknown outcome. A variable for tests.
var maxReplyBody atomic.Int64

func init() { maxReplyBody.Store(1 << 30) }

// ErrAnswerLost: the leader applied the command, but its answer did not
// come back (over maxReplyBody, or cut off while it was read). Unlike
// ErrUnknownOutcome the outcome is known, so the command must not be
// repeated: a repeat would find its effect (a closed session, a released
// hold) and report something else.
var ErrAnswerLost = errors.New("raftnode: the leader applied the command, but its answer was lost")

// wireReply answers every internal call.
type wireReply struct {
	Code    string            `msgpack:"code,omitempty"`
	Message string            `msgpack:"message,omitempty"`
	Index   uint64            `msgpack:"index,omitempty"`
	Result  *lockstate.Result `msgpack:"result,omitempty"`
	TTL     time.Duration     `msgpack:"ttl,omitempty"`
	Digest  []byte            `msgpack:"digest,omitempty"`
	// Request answers an await: the request as the answering node's table
	// shows it; nil when it does not hold the request.
	Request *lockstate.RequestInfo `msgpack:"request,omitempty"`
	// TTLs answers a batched keepalive: each session's TTL, 0 for one
	// that is gone.
	TTLs []time.Duration `msgpack:"ttls,omitempty"`
}

type keepAliveRequest struct {
	Session  lockstate.SessionID   `msgpack:"session"`
	Sessions []lockstate.SessionID `msgpack:"sessions,omitempty"` // pathKeepAlives
}

// errNoSuchPath: the peer does not serve an internal path (an older
// build); the call did nothing.
var errNoSuchPath = errors.New("raftnode: the peer does not serve this call")

type removeRequest struct {
	ID string `msgpack:"id"`
	// Leaving: the caller, which must be ID, leaves for good (RemoveSelf).
	// A leader of an older build ignores it and removes ID anyway.
	Leaving bool `msgpack:"leaving,omitempty"`
}

// forwardPropose sends cmd to the leader, without a timestamp: the leader
// stamps it with its own clock.
func (n *Node) forwardPropose(ctx context.Context, addr string, cmd lockstate.Command) (*lockstate.Result, uint64, error) {
	// The oldest format that can carry the command (bare, which every
	// build reads, unless it has ACL fields): during a rolling upgrade the
	// leader may run an older build. The leader re-encodes the command for
	// the log in the format every voter applies; TLS guards the wire.
	body, err := fsm.EncodeFormat(fsm.MinFormat(cmd), 0, cmd)
	if err != nil {
		return nil, 0, fmt.Errorf("raftnode: encode %T: %w", cmd, err)
	}
	rep, err := n.forward(ctx, addr, pathPropose, body, true)
	if err != nil {
		return nil, 0, err
	}
	if rep.Result == nil {
		return nil, 0, fmt.Errorf("raftnode: leader at %s answered without a result", addr)
	}
	return rep.Result, rep.Index, nil
}

func (n *Node) forwardReadIndex(ctx context.Context, addr string) (uint64, error) {
	rep, err := n.forward(ctx, addr, pathReadIndex, nil, false)
	if err != nil {
		return 0, err
	}
	return rep.Index, nil
}

func (n *Node) forwardKeepAlive(ctx context.Context, addr string, id lockstate.SessionID) (time.Duration, error) {
	body, err := msgpack.Marshal(keepAliveRequest{Session: id})
	if err != nil {
		return 0, fmt.Errorf("raftnode: encode keepalive: %w", err)
	}
	rep, err := n.forward(ctx, addr, pathKeepAlive, body, false)
	if err != nil {
		return 0, err
	}
	return rep.TTL, nil
}

// forwardKeepAliveMany sends a batched keepalive to the leader. A leader
// of an older build, which does not serve batches, gets the sessions one
// by one (a rolling upgrade).
func (n *Node) forwardKeepAliveMany(ctx context.Context, addr string, ids []lockstate.SessionID) ([]time.Duration, error) {
	body, err := msgpack.Marshal(keepAliveRequest{Sessions: ids})
	if err != nil {
		return nil, fmt.Errorf("raftnode: encode keepalives: %w", err)
	}
	rep, err := n.forward(ctx, addr, pathKeepAlives, body, false)
	switch {
	case errors.Is(err, errNoSuchPath):
		return n.forwardKeepAliveEach(ctx, addr, ids)
	case err != nil:
		return nil, err
	case len(rep.TTLs) != len(ids):
		return nil, fmt.Errorf("%w: leader at %s answered %d ttls for %d sessions", errRetry, addr, len(rep.TTLs), len(ids))
	}
	return rep.TTLs, nil
}

// forwardKeepAliveEach keeps sessions alive one call each.
func (n *Node) forwardKeepAliveEach(ctx context.Context, addr string, ids []lockstate.SessionID) ([]time.Duration, error) {
	ttls := make([]time.Duration, len(ids))
	for i, id := range ids {
		ttl, err := n.forwardKeepAlive(ctx, addr, id)
		switch {
		case errors.Is(err, ErrSessionNotFound):
		case err != nil:
			return nil, err
		default:
			ttls[i] = ttl
		}
	}
	return ttls, nil
}

// forward makes one internal call. A failure before the request was fully
// written is retryable; after it, a write (mutates) has an unknown
// outcome, while reads and keepalives may simply be retried.
func (n *Node) forward(ctx context.Context, addr, path string, body []byte, mutates bool) (*wireReply, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, forwardTimeout)
		defer cancel()
	}
	if !mutates {
		// A read-index or keepalive sent to a leader that hangs (paused,
		// partitioned) must not wait out the caller's whole deadline while
		// a new leader is elected: one attempt lasts about an election,
		// then leaderCall looks for the leader again. Repeating these is
		// safe.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*n.timing.heartbeat+n.timing.election)
		defer cancel()
	}
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("raftnode: forward to %s: %w", addr, err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set(headerForwarder, n.cfg.ID)

	failed := func(err error) error {
		if mutates && wrote.Load() {
			return fmt.Errorf("%w: forwarded to %s: %w", ErrUnknownOutcome, addr, err)
		}
		return fmt.Errorf("%w: forward to %s: %w", errRetry, addr, err)
	}
	resp, err := n.clientFor(path).Do(req)
	if err != nil {
		return nil, failed(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != contentType {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return nil, fmt.Errorf("%w: %w: forward to %s%s: %s", errRetry, errNoSuchPath, addr, path, resp.Status)
		}
		// Not our protocol (a node still starting, a proxy in the way):
		// whatever answered did not run the command.
		return nil, fmt.Errorf("%w: forward to %s%s: unexpected answer %s", errRetry, addr, path, resp.Status)
	}
	rep, err := readReply(resp.Body)
	if err != nil && mutates && resp.StatusCode == http.StatusOK {
		// The leader answers 200 only after it applied the command.
		return nil, fmt.Errorf("%w (leader at %s): %w", ErrAnswerLost, addr, err)
	}
	if err != nil {
		return nil, failed(err)
	}
	if err := rep.err(addr); err != nil {
		return nil, err
	}
	return rep, nil
}

// clientFor returns the client (the pool of connections) for calls to
// path; a Node built without the others (tests) uses client for all.
func (n *Node) clientFor(path string) *http.Client {
	hc := n.control
	switch path {
	case pathPropose:
		hc = n.client
	case pathAwait:
		hc = n.awaits
	}
	if hc == nil {
		return n.client
	}
	return hc
}

// err is the failure a reply's code reports, or nil.
func (rep *wireReply) err(addr string) error {
	switch rep.Code {
	case "":
		return nil
	case codeNotLeader, codeNotMember:
		return fmt.Errorf("%w: %s says: %s", errRetry, addr, rep.Message)
	case codeUnknownOutcome:
		return fmt.Errorf("%w: leader at %s: %s", ErrUnknownOutcome, addr, rep.Message)
	case codeSessionNotFound:
		return ErrSessionNotFound
	case codeRemoveLeader:
		return ErrRemoveLeader
	case codeMemberAlive:
		return ErrMemberAlive
	case codeTooLarge:
		return fmt.Errorf("%w: leader at %s: %s", ErrAnswerLost, addr, rep.Message)
	default:
		return fmt.Errorf("raftnode: leader at %s: %s", addr, rep.Message)
	}
}

// readReply decodes one answer of at most maxReplyBody bytes.
func readReply(body io.Reader) (*wireReply, error) {
	limit := maxReplyBody.Load()
	lr := &io.LimitedReader{R: body, N: limit + 1}
	var rep wireReply
	err := msgpack.NewDecoder(lr).Decode(&rep)
	if lr.N <= 0 {
		return nil, fmt.Errorf("read answer: over %d bytes", limit)
	}
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	return &rep, nil
}

// newHandler serves the internal endpoints. Each answers for this node
// only (see the protocol above).
func (n *Node) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathPropose, n.handlePropose)
	mux.HandleFunc("POST "+pathReadIndex, n.handleReadIndex)
	mux.HandleFunc("POST "+pathKeepAlive, n.handleKeepAlive)
	if !n.cfg.noBatchedKeepAlive {
		mux.HandleFunc("POST "+pathKeepAlives, n.handleKeepAlives)
	}
	mux.HandleFunc("POST "+pathRemove, n.handleRemove)
	mux.HandleFunc("POST "+pathDigest, n.handleDigest)
	mux.HandleFunc("POST "+pathAwait, n.handleAwait)
	return n.fromMember(mux)
}

func (n *Node) handlePropose(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		writeReply(w, http.StatusBadRequest, wireReply{Code: codeError, Message: "read body: " + err.Error()})
		return
	}
	_, cmd, err := fsm.Decode(body) // the sender's timestamp is ignored
	if err != nil {
		writeReply(w, http.StatusBadRequest, wireReply{Code: codeError, Message: "decode command: " + err.Error()})
		return
	}
	res, index, err := n.proposeLocal(r.Context(), cmd)
	if err != nil {
		n.replyError(w, err)
		return
	}
	writeReply(w, http.StatusOK, wireReply{Index: index, Result: res})
}

func (n *Node) handleReadIndex(w http.ResponseWriter, r *http.Request) {
	index, err := n.readIndexLocal()
	if err != nil {
		n.replyError(w, err)
		return
	}
	writeReply(w, http.StatusOK, wireReply{Index: index})
}

func (n *Node) handleKeepAlive(w http.ResponseWriter, r *http.Request) {
	var req keepAliveRequest
	if err := msgpack.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(&req); err != nil {
		writeReply(w, http.StatusBadRequest, wireReply{Code: codeError, Message: "decode keepalive: " + err.Error()})
		return
	}
	ttl, err := n.keepAliveLocal(req.Session)
	if err != nil {
		n.replyError(w, err)
		return
	}
	writeReply(w, http.StatusOK, wireReply{TTL: ttl})
}

func (n *Node) handleKeepAlives(w http.ResponseWriter, r *http.Request) {
	var req keepAliveRequest
	if err := msgpack.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(&req); err != nil {
		writeReply(w, http.StatusBadRequest, wireReply{Code: codeError, Message: "decode keepalives: " + err.Error()})
		return
	}
	if len(req.Sessions) > MaxKeepAliveBatch {
		writeReply(w, http.StatusBadRequest, wireReply{Code: codeError,
			Message: fmt.Sprintf("%d sessions in one keepalive, at most %d", len(req.Sessions), MaxKeepAliveBatch)})
		return
	}
	ttls, err := n.keepAliveManyLocal(req.Sessions)
	if err != nil {
		n.replyError(w, err)
		return
	}
	writeReply(w, http.StatusOK, wireReply{TTLs: ttls})
}

func (n *Node) handleRemove(w http.ResponseWriter, r *http.Request) {
	var req removeRequest
	if err := msgpack.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(&req); err != nil {
		writeReply(w, http.StatusBadRequest, wireReply{Code: codeError, Message: "decode remove: " + err.Error()})
		return
	}
	if req.Leaving && n.caller(r) != req.ID {
		// Skipping the remove rule is for a node that leaves, and
		// only it may say so.
		writeReply(w, http.StatusForbidden, wireReply{Code: codeError,
			Message: fmt.Sprintf("%q cannot remove %q as leaving: only a node itself leaves", n.caller(r), req.ID)})
		return
	}
	if err := n.removeMemberLocal(req.ID, req.Leaving); err != nil {
		n.replyError(w, err)
		return
	}
	writeReply(w, http.StatusOK, wireReply{})
}

func (n *Node) handleDigest(w http.ResponseWriter, r *http.Request) {
	index, digest := n.digestOf()
	writeReply(w, http.StatusOK, wireReply{Index: index, Digest: digest[:]})
}

// caller is the node an internal call comes from: the name in its node
// certificate, or, without TLS (no names to prove anything), the id it
// sends along.
func (n *Node) caller(r *http.Request) string {
	if n.cfg.PeerServerTLS == nil {
		return r.Header.Get(headerForwarder)
	}
	peer, _ := r.Context().Value(peerNameKey{}).(peerCert)
	return peer.name
}

// forwardRemove asks the leader to remove server id (leaving: id is this
// node, leaving). Removing is idempotent, so a broken call may simply be
// tried again.
func (n *Node) forwardRemove(ctx context.Context, addr, id string, leaving bool) error {
	body, err := msgpack.Marshal(removeRequest{ID: id, Leaving: leaving})
	if err != nil {
		return fmt.Errorf("raftnode: encode remove: %w", err)
	}
	_, err = n.forward(ctx, addr, pathRemove, body, false)
	return err
}

// replyError maps a local failure to the protocol's codes.
func (n *Node) replyError(w http.ResponseWriter, err error) {
	switch {
	case retryable(err), errors.Is(err, ErrNoLeader):
		writeReply(w, http.StatusServiceUnavailable, wireReply{Code: codeNotLeader, Message: err.Error()})
	case errors.Is(err, ErrUnknownOutcome):
		writeReply(w, http.StatusServiceUnavailable, wireReply{Code: codeUnknownOutcome, Message: err.Error()})
	case errors.Is(err, ErrSessionNotFound):
		writeReply(w, http.StatusNotFound, wireReply{Code: codeSessionNotFound, Message: err.Error()})
	case errors.Is(err, ErrRemoveLeader):
		writeReply(w, http.StatusBadRequest, wireReply{Code: codeRemoveLeader, Message: err.Error()})
	case errors.Is(err, ErrMemberAlive):
		writeReply(w, http.StatusConflict, wireReply{Code: codeMemberAlive, Message: err.Error()})
	default:
		n.logger.Error("internal call failed", "error", err)
		writeReply(w, http.StatusInternalServerError, wireReply{Code: codeError, Message: err.Error()})
	}
}

// writeReply answers rep. An answer over maxReplyBody, which the caller
// would not read, becomes codeTooLarge: the caller learns that the command
// was applied (at rep.Index) and that its answer is lost, rather than
// taking a cut-off answer for an unknown outcome and repeating it.
func writeReply(w http.ResponseWriter, status int, rep wireReply) {
	b, err := msgpack.Marshal(&rep)
	if err != nil {
		b, _ = msgpack.Marshal(&wireReply{Code: codeError, Message: "encode reply: " + err.Error()})
		status = http.StatusInternalServerError
	}
	if limit := maxReplyBody.Load(); int64(len(b)) > limit {
		b, _ = msgpack.Marshal(&wireReply{Code: codeTooLarge, Index: rep.Index,
			Message: fmt.Sprintf("applied at index %d, but the answer takes %d bytes, over the limit of %d", rep.Index, len(b), limit)})
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
