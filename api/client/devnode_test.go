package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/raftnode"
)

// devNode is one in-process lockd node with real raft, like `lockd --dev`.
type devNode struct {
	Addr string // host:port of its HTTP API
	dir  string
	node *raftnode.Node
	srv  *api.Server
	http *http.Server
}

// startDevNode starts a single node that bootstraps itself and waits
// until it leads. tweak may adjust the API config (e.g. MaxWait).
func startDevNode(tweak func(*api.Config)) (*devNode, error) {
	dir, err := os.MkdirTemp("", "lockd-client-test-")
	if err != nil {
		return nil, err
	}
	n := &devNode{dir: dir}
	ok := false
	defer func() {
		if !ok {
			n.Stop()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	n.Addr = ln.Addr().String()
	logger := hclog.New(&hclog.LoggerOptions{Name: "dev", Level: hclog.Error, Output: io.Discard})
	peer := func(id string) (string, bool) { return n.Addr, id == "dev" }
	n.node, err = raftnode.Open(raftnode.Config{ID: "dev", DataDir: dir, RaftBind: "127.0.0.1:0",
		Logger: logger, Timing: lockdtest.Timing(0.1)})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("open raft: %w", err)
	}
	cfg := api.Config{Node: n.node, HTTPAddr: n.Addr, PeerHTTP: peer, Logger: logger,
		CancelGrace: 300 * time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	if n.srv, err = api.New(cfg); err != nil {
		ln.Close()
		return nil, err
	}
	n.http = &http.Server{Handler: n.srv}
	go n.http.Serve(ln)
	if err := n.node.Bootstrap([]raftnode.Server{{ID: "dev", Addr: n.node.RaftAddr(), Voter: true}}); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	for deadline := time.Now().Add(10 * time.Second); n.node.Status().State != "leader"; {
		if time.Now().After(deadline) {
			return nil, errors.New("no leader within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ok = true
	return n, nil
}

// Stop shuts the node down and removes its data.
func (n *devNode) Stop() {
	if n.srv != nil {
		n.srv.Close()
	}
	if n.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = n.http.Shutdown(ctx)
		cancel()
	}
	if n.node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = n.node.Shutdown(ctx)
		cancel()
	}
	os.RemoveAll(n.dir)
}

// exampleServer starts a dev node for an Example and returns its address
// and a function that stops it.
func exampleServer() (addr string, stop func()) {
	n, err := startDevNode(nil)
	if err != nil {
		panic(err)
	}
	return n.Addr, n.Stop
}
