package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
)

// Clock faults move what one node (the leader three times in four) reads
// as its wall clock, through the
// clock hook of lockd (--test-clock-hook: PUT /v1/debug/clock), since
// containers share the host's clock. Like settimeofday, the offset moves
// the wall clock only, never the monotonic one. A bump steps the clock by
// 5 s..5 min (forward three times in four) for the fault's duration; a
// strobe flips it between 0 and such a step every 20..200 ms. Undoing either sets the offset back to
// 0, which is one more step. A node restarted meanwhile starts at 0.

// clockTarget picks the node whose clock moves: the leader three times in
// four (its clock is the one that stamps commands, what a clock step can
// break), else any node.
func clockTarget(ctx context.Context, c *compose.Cluster, r *rand.Rand) string {
	nodes := c.Names()
	if r.Intn(4) != 0 {
		if l := currentLeader(ctx, c); l != "" {
			return l
		}
	}
	return nodes[r.Intn(len(nodes))]
}

// clockStep draws a step of 5 s..5 min, forward three times in four: a
// step forward of the leader's clock is what would end holds early, a
// step back only freezes table time until it is undone.
func clockStep(r *rand.Rand) time.Duration {
	d := between(r, 5*time.Second, 5*time.Minute).Round(time.Second)
	if r.Intn(4) == 0 {
		return -d
	}
	return d
}

// resetClock sets node's offset back to 0.
func resetClock(c *compose.Cluster, node string) func(ctx context.Context) error {
	return func(ctx context.Context) error { return c.SetClock(ctx, node, 0) }
}

// clockBump steps node's wall clock.
func clockBump(ctx context.Context, c *compose.Cluster, node string, r *rand.Rand) (*fault, error) {
	step := clockStep(r)
	ft := &fault{name: FaultClockBump, targets: []string{node, step.String()}, undo: resetClock(c, node)}
	return ft, c.SetClock(ctx, node, step)
}

// clockStrobe flips node's wall clock back and forth until undone.
func clockStrobe(ctx context.Context, c *compose.Cluster, node string, r *rand.Rand) (*fault, error) {
	step := clockStep(r)
	every := between(r, 20*time.Millisecond, 200*time.Millisecond).Round(time.Millisecond)
	if err := c.SetClock(ctx, node, step); err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		on := true
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			on = !on
			_ = c.SetClock(sctx, node, map[bool]time.Duration{true: step, false: 0}[on]) // a failed flip is one flip fewer
		}
	}()
	undo := func(ctx context.Context) error {
		stop()
		wg.Wait()
		return resetClock(c, node)(ctx)
	}
	return &fault{name: FaultClockStrobe, targets: []string{node, fmt.Sprintf("%v/%v", step, every)}, undo: undo}, nil
}
