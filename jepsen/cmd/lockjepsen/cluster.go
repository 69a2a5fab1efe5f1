package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/history"
)

// previousRelease is the build upgrade runs start on by default: the
// last commit before the clock, membership, disk and upgrade faults.
const (
	previousRelease = "77099b9"
	// preACLRelease is the last commit before ACLs and log format 3
	// (FormatACL): an upgrade from it crosses a log format change.
	preACLRelease = "27210eb"
)

// imageTagRune keeps the runes a docker tag may hold and maps the rest
// to '-'.
func imageTagRune(r rune) rune {
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
		return r
	}
	return '-'
}

// up starts the cluster; under no-consensus every node is a cluster of
// its own, so only each node's own leadership is awaited.
func up(ctx context.Context, cl *compose.Cluster, standalone bool) error {
	if !standalone {
		return cl.Up(ctx)
	}
	if _, err := cl.Compose(ctx, append([]string{"up", "-d"}, cl.Names()...)...); err != nil {
		return err
	}
	return waitEach(ctx, cl)
}

// waitEach waits until every node knows a leader, its own or not.
func waitEach(ctx context.Context, cl *compose.Cluster) error {
	wctx, cancel := context.WithTimeout(ctx, compose.UpTimeout)
	defer cancel()
	for _, n := range cl.Names() {
		if err := cl.WaitNode(wctx, n); err != nil {
			return err
		}
	}
	return nil
}

// tearDown stops the cluster unless --keep.
func tearDown(cfg *runConfig, cl *compose.Cluster, logf func(string, ...any)) {
	if cfg.keep {
		logf("cluster %s left running (--keep)", cfg.project)
		return
	}
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Down(dctx); err != nil {
		logf("tear down: %v", err)
	}
}

// converge polls every node until all report the same applied index and
// digest (followers apply a moment after the leader), or the bound ends;
// it returns the last reports.
func converge(ctx context.Context, cl *compose.Cluster, bound time.Duration) []checker.NodeState {
	deadline := time.Now().Add(bound)
	for {
		var out []checker.NodeState
		same := true
		for _, n := range cl.Names() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := cl.Status(sctx, n)
			cancel()
			ns := checker.NodeState{Node: n}
			if err != nil {
				ns.Err = err.Error()
				same = false
			} else {
				ns.AppliedIndex, ns.Digest = st.AppliedIndex, st.Digest
			}
			if len(out) > 0 && (ns.AppliedIndex != out[0].AppliedIndex || ns.Digest != out[0].Digest) {
				same = false
			}
			out = append(out, ns)
		}
		if same || time.Now().After(deadline) || ctx.Err() != nil {
			return out
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// snapshotInstalls counts, per node, the snapshots it installed from
// the leader (hashicorp/raft logs "Installed remote snapshot"), in the
// node logs saved in dir.
func snapshotInstalls(dir string, nodes []string) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		b, err := os.ReadFile(filepath.Join(dir, n+".log"))
		if err != nil {
			continue
		}
		if k := strings.Count(string(b), "Installed remote snapshot"); k > 0 {
			out[n] = k
		}
	}
	return out
}

func saveLogs(cl *compose.Cluster, outDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.SaveLogs(ctx, filepath.Join(outDir, "logs")); err != nil {
		fmt.Fprintln(os.Stderr, "lockjepsen: saving node logs:", err)
	}
}

// commit is the repository's HEAD (with "+dirty" for local changes), for
// the report.
func commit(dir string) string {
	out, err := exec.Command("git", "-C", dir, "describe", "--always", "--dirty=+dirty").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// sampleMetrics records every node's history.SampledMetrics every
// `every` until ctx ends (a node that does not answer is skipped).
func sampleMetrics(ctx context.Context, cl *compose.Cluster, rec *history.Recorder, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, n := range cl.Names() {
			m, err := cl.Metrics(ctx, n, history.SampledMetrics)
			if err != nil {
				continue
			}
			values := map[string][]int64{}
			for k, v := range m {
				values[k] = []int64{int64(v)}
			}
			rec.Add(history.Event{Type: history.Info, Process: history.Harness, F: history.Metrics, Node: n, Values: values})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
