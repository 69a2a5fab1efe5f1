package raftnode

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func newTCPTransport(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trans.Close() })
	return trans
}

// A follower refuses every AppendEntries (as one whose disk is full
// does), and the leader drives the pipeline as hashicorp/raft's
// pipelineReplicate does: a decoder that stops at the first failed
// response, and a sender that goes on sending until a send fails. With
// raft's own pipeline the third send blocks for good (bug 16); the
// mended one is closed at the failed response, so a send fails and raft
// falls back to plain AppendEntries.
func TestPipelineClosedAtAFailedResponse(t *testing.T) {
	follower := newTCPTransport(t)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case rpc := <-follower.Consumer():
				rpc.Respond(nil, errors.New("write /data/raft.db: no space left on device"))
			case <-stop:
				return
			}
		}
	}()
	leader := newTCPTransport(t)
	p, err := pipelineTransport{NetworkTransport: leader}.AppendEntriesPipeline("f", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	go func() { <-p.Consumer() }() // pipelineDecode returns at a failed response

	sent := make(chan error, 1)
	go func() {
		for range 100 {
			req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("l")}, Term: 1}
			if _, err := p.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	select {
	case err := <-sent:
		if err == nil {
			t.Fatal("100 sends went through a pipeline whose responses nobody reads")
		}
	case <-time.After(time.Minute): // a deadlock bound, not a speed check
		t.Fatal("a send blocked for good: the pipeline was not closed at the failed response")
	}
}
