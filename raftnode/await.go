package raftnode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/raft"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lockd/lockd/lockstate"
)

// A pending acquire made through a follower is granted when the leader
// applies the release that frees its names; the follower applies that
// entry only once the next AppendEntries tells it the entry committed.
// AwaitOnLeader lets the follower ask the leader instead, and hear of the
// grant as soon as the leader applied it. The leader's table holds only
// committed entries, so its answer is as final as the follower's own.

// Awaiter waits on this node, for at most wait, until it has applied the
// entry at index created and request id of session is no longer pending
// in its table, and returns the request as the table then shows it. found
// is false when the table does not hold that request (the same id,
// session and created index: an id may be reused once its first request
// is forgotten), or when it could not wait. The lock service sets it
// (lockservice.Service).
type Awaiter func(ctx context.Context, id string, session lockstate.SessionID, created uint64, wait time.Duration) (info lockstate.RequestInfo, found bool)

// ErrLeaderHere is AwaitOnLeader's answer on the leader itself: its own
// table sees every commit at once, so wait there.
var ErrLeaderHere = errors.New("raftnode: this node is the leader")

// errAwaitsBusy: awaitConns waits on the leader are in flight already.
var errAwaitsBusy = errors.New("raftnode: waits on the leader are all taken")

type awaitRequest struct {
	ID      string              `msgpack:"id"`
	Session lockstate.SessionID `msgpack:"session"`
	Created uint64              `msgpack:"created"`
	Wait    time.Duration       `msgpack:"wait"`
}

// SetAwaiter installs the function that answers other nodes' awaits.
func (n *Node) SetAwaiter(a Awaiter) { n.awaiter.Store(&a) }

// AwaitOnLeader waits on the leader, for at most wait, until request req
// is no longer pending there, and returns its state. final is
// false when the request was still pending at the end (or the leader did
// not hold it). Each call to the leader lasts a fraction of an election
// timeout, so a leader that fails is noticed and the next one asked. Any
// failure ends the wait with an error: the caller still has its own table.
// So does a node that has awaitConns waits on the leader already: the
// rest wait only in their own table.
func (n *Node) AwaitOnLeader(ctx context.Context, req *lockstate.RequestInfo, wait time.Duration) (info lockstate.RequestInfo, final bool, err error) {
	select {
	case n.awaitSlots <- struct{}{}:
		defer func() { <-n.awaitSlots }()
	default:
		return info, false, errAwaitsBusy
	}
	// The same bound as forward gives one read (2 heartbeats + election),
	// halved so that the leader answers before the caller gives up.
	step := (2*n.timing.heartbeat + n.timing.election) / 2
	end := time.Now().Add(wait)
	for {
		left := time.Until(end)
		if left <= 0 {
			return info, false, nil
		}
		if n.raft.State() == raft.Leader {
			return info, false, ErrLeaderHere
		}
		addr, _ := n.raft.LeaderWithID()
		if addr == "" {
			return info, false, fmt.Errorf("%w: no leader known", errRetry)
		}
		asked := min(step, left)
		body, err := msgpack.Marshal(awaitRequest{ID: req.ID, Session: req.Session, Created: req.Created, Wait: asked})
		if err != nil {
			return info, false, fmt.Errorf("raftnode: encode await: %w", err)
		}
		start := time.Now()
		rep, err := n.forward(ctx, string(addr), pathAwait, body, false)
		got := rep.request()
		switch {
		case err != nil:
			return info, false, err
		case got == nil || got.ID != req.ID || got.Session != req.Session || got.Created != req.Created:
			return info, false, nil // the leader does not hold it, or could not wait
		case got.Status != lockstate.Pending:
			return *got, true, nil
		case time.Since(start) < asked/2:
			// Pending long before the wait asked for: the leader stopped
			// waiting (it is closing); asking again would only spin.
			return info, false, nil
		}
	}
}

func (n *Node) handleAwait(w http.ResponseWriter, r *http.Request) {
	var req awaitRequest
	if err := msgpack.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(&req); err != nil {
		writeReply(w, http.StatusBadRequest, wireReply{Code: codeError, Message: "decode await: " + err.Error()})
		return
	}
	awaiter := n.awaiter.Load()
	if awaiter == nil {
		writeReply(w, http.StatusServiceUnavailable, wireReply{Code: codeNotLeader, Message: "this node does not serve waits yet"})
		return
	}
	wait := min(max(req.Wait, 0), forwardTimeout/2)
	info, found := (*awaiter)(r.Context(), req.ID, req.Session, req.Created, wait)
	if !found {
		writeReply(w, http.StatusOK, wireReply{})
		return
	}
	writeReply(w, http.StatusOK, wireReply{Request: &info})
}

// request is an await's answer: the request, or nil for none (or for no
// reply).
func (rep *wireReply) request() *lockstate.RequestInfo {
	if rep == nil {
		return nil
	}
	return rep.Request
}
