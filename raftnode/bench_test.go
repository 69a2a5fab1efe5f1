package raftnode

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// BenchmarkPropose measures acquire proposals on a 3-node cluster (fsync
// on) from many goroutines at once, on the leader and through a follower.
// Raft batches concurrent entries, so throughput should grow with
// parallelism.
func BenchmarkPropose(b *testing.B) {
	for _, via := range []string{"leader", "follower"} {
		for _, par := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", via, par), func(b *testing.B) {
				// Raft's default timeouts, as in production.
				c := newTestCluster(b, 3, func(cfg *Config) { cfg.Timing = 1 })
				l := c.leader()
				n := l.get()
				if via == "follower" {
					n = c.followers(l)[0].get()
				}
				s := createSessionB(b, n)
				var seq atomic.Int64
				b.SetParallelism(max(par/runtime.GOMAXPROCS(0), 1))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						id := fmt.Sprintf("r%d", seq.Add(1))
						cmd := &lockstate.Acquire{
							Session: s, RequestID: id,
							Locks: []lockstate.LockSpec{{Name: "bench/" + id, Mode: lockstate.Write}},
						}
						res, _, err := n.Propose(context.Background(), cmd)
						for retryableInTest(cmd, err) {
							res, _, err = n.Propose(context.Background(), cmd)
						}
						if err != nil || res.Err != nil {
							b.Errorf("propose: %v %v", err, res)
							return
						}
					}
				})
			})
		}
	}
}

func createSessionB(b *testing.B, n *Node) lockstate.SessionID {
	b.Helper()
	res, _, err := n.Propose(context.Background(), &lockstate.CreateSession{TTL: time.Hour})
	if err != nil || res.Err != nil {
		b.Fatalf("create session: %v %v", err, res)
	}
	return res.Session
}

// BenchmarkCommit measures one commit, proposals made one after another
// on the leader: with one node it is the leader's disk (the log write and
// its fsyncs), with three also the round trip to a follower and its disk.
// Each log store (bolt, the default, and raft-wal) on its own.
func BenchmarkCommit(b *testing.B) {
	for _, store := range []string{LogBolt, LogWAL} {
		for _, nodes := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/nodes=%d", store, nodes), func(b *testing.B) {
				c := newTestCluster(b, nodes, func(cfg *Config) { cfg.Timing, cfg.LogStore = 1, store })
				n := c.leader().get()
				s := createSessionB(b, n)
				b.ResetTimer()
				for i := range b.N {
					cmd := &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{{Name: fmt.Sprintf("bench/%d", i), Mode: lockstate.Write}}}
					if res, _, err := n.Propose(context.Background(), cmd); err != nil || res.Err != nil {
						b.Fatalf("propose: %v %v", err, res)
					}
				}
			})
		}
	}
}
