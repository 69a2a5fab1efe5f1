package raftnode

import (
	"sync"

	"github.com/hashicorp/raft"
)

// hashicorp/raft's pipelined replication can stop replicating to a
// follower for good (hashicorp/raft#612; bug 16 of docs/jepsen.md): the
// leader's pipelineDecode returns on the first failed or refused
// response, and nothing reads the pipeline's unbuffered response channel
// any more; the next AppendEntries the sender loop makes then waits for
// the transport's decoder, which waits for that reader, and the pipeline
// is closed only when the sender returns. Heartbeats go on, so no
// election mends it: the follower (one restarted after a failed disk
// write, say) never gets another entry.
//
// pipelineTransport closes a pipeline at the first response that ends
// pipelineDecode — the same three conditions — so that the blocked send
// returns (raft.ErrPipelineShutdown, or a write error on the closed
// connection) and raft falls back to plain AppendEntries, which retries
// and catches the follower up.
type pipelineTransport struct {
	*raft.NetworkTransport
	// answered, if set, is told of every response a pipeline relays
	// (contacts records them).
	answered func(raft.ServerID, raft.AppendFuture)
}

// AppendEntriesPipeline returns the transport's pipeline to target,
// mended.
func (t pipelineTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	var answered func(raft.AppendFuture)
	if t.answered != nil {
		answered = func(f raft.AppendFuture) { t.answered(id, f) }
	}
	return newClosingPipeline(p, answered), nil
}

// closingPipeline relays an AppendPipeline's responses and closes it at
// the first one raft's pipelineDecode stops at.
type closingPipeline struct {
	raft.AppendPipeline
	responses chan raft.AppendFuture
	closed    chan struct{}
	closeOnce sync.Once
	answered  func(raft.AppendFuture) // nil, or told of each response
}

func newClosingPipeline(p raft.AppendPipeline, answered func(raft.AppendFuture)) *closingPipeline {
	c := &closingPipeline{AppendPipeline: p,
		responses: make(chan raft.AppendFuture), closed: make(chan struct{}), answered: answered}
	go c.relay()
	return c
}

func (c *closingPipeline) relay() {
	inner := c.AppendPipeline.Consumer()
	for {
		select {
		case f := <-inner:
			if c.answered != nil {
				c.answered(f)
			}
			if endsDecode(f) {
				_ = c.AppendPipeline.Close() // before handing f on: the sender may be blocked already
			}
			select {
			case c.responses <- f:
			case <-c.closed:
				return
			}
		case <-c.closed:
			return
		}
	}
}

// endsDecode reports whether raft's pipelineDecode returns at f: a
// failed RPC (its response is then empty), a newer term, or a refusal.
func endsDecode(f raft.AppendFuture) bool {
	if f.Error() != nil {
		return true
	}
	resp := f.Response()
	return resp.Term > f.Request().Term || !resp.Success
}

// Consumer returns the relayed responses.
func (c *closingPipeline) Consumer() <-chan raft.AppendFuture { return c.responses }

// Close closes the pipeline and stops the relay.
func (c *closingPipeline) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.AppendPipeline.Close()
}
