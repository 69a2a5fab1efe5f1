package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/workload"
)

// Runs are made with ACLs on, as the compose cluster starts (LOCKD_ACL,
// default 1): setupACL bootstraps the cluster and makes the run's tokens
// (workload.SetupACL says how a lost bootstrap answer is handled).

// freshClusters bounds how many times a cluster whose bootstrap answer
// was lost is replaced by a fresh one.
const freshClusters = 2

// setupACL bootstraps the cluster and makes the run's tokens. When the
// bootstrap's answer was lost after it committed (its secret is unknown)
// it tears the cluster down, data included, brings up a fresh one and
// bootstraps that, at most freshClusters times.
func setupACL(ctx context.Context, cl *compose.Cluster, workers int, logf func(string, ...any)) (*workload.Tokens, error) {
	for fresh := 0; ; fresh++ {
		toks, err := tryACL(ctx, cl, workers)
		if !errors.Is(err, workload.ErrBootstrapLost) || fresh == freshClusters {
			return toks, err
		}
		logf("%v: starting a fresh cluster", err)
		if err := cl.Down(ctx); err != nil {
			return nil, err
		}
		if err := cl.Up(ctx); err != nil {
			return nil, err
		}
	}
}

func tryACL(ctx context.Context, cl *compose.Cluster, workers int) (*workload.Tokens, error) {
	conf, err := cl.TLS()
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	return workload.SetupACL(ctx, hc, "https://"+cl.HTTPAddr(cl.Names()[0]), workers)
}
