package lockservice_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// startService opens a real one-node raft cluster and the service on it.
// wrap, if set, puts a fault injector between the service and the node.
func startService(t *testing.T, cfg raftnode.Config, wrap func(*raftnode.Node) lockservice.Node) (*lockservice.Service, *raftnode.Node) {
	t.Helper()
	// The node binds port 0 itself and keeps it: a port found free by a
	// listener closed before Open could be taken meanwhile (by another
	// package's connection, whose source ports come from the same range).
	cfg.ID, cfg.DataDir, cfg.RaftBind, cfg.Timing = "n1", t.TempDir(), "127.0.0.1:0", lockdtest.Timing(0.1)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "n1", Level: hclog.Warn, Output: io.Discard})
	node, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := node.RaftAddr()
	var n lockservice.Node = node
	if wrap != nil {
		n = wrap(node)
	}
	svc, err := lockservice.New(lockservice.Config{Node: n, Logger: cfg.Logger, CancelGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = node.Shutdown(ctx)
	})
	if err := node.Bootstrap([]raftnode.Server{{ID: "n1", Addr: addr, Voter: true}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for node.Status().State != "leader" {
		if time.Now().After(deadline) {
			t.Fatal("no leader after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return svc, node
}

func session(t *testing.T, svc *lockservice.Service) string {
	t.Helper()
	_, key, err := svc.CreateSession(context.Background(), &lockstate.CreateSession{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func acquire(svc *lockservice.Service, s string, name string, wait time.Duration, id string) (*lockstate.RequestInfo, error) {
	return svc.Acquire(context.Background(), s, &lockstate.Acquire{RequestID: id, Wait: wait,
		Locks: []lockstate.LockSpec{{Name: name, Mode: lockstate.Write}}})
}

// mustAcquire takes name for s at once or fails the test.
func mustAcquire(t *testing.T, svc *lockservice.Service, s string, name, id string) *lockstate.RequestInfo {
	t.Helper()
	info, err := acquire(svc, s, name, 0, id)
	return mustGrant(t, info, err)
}

func mustGrant(t *testing.T, info *lockstate.RequestInfo, err error) *lockstate.RequestInfo {
	t.Helper()
	if err != nil || info == nil || info.Status != lockstate.Granted {
		t.Fatalf("want a grant, got %+v, %v", info, err)
	}
	return info
}

// code returns the table code of err, or "" when it is not a refusal.
func code(err error) lockstate.Code {
	if le, ok := err.(*lockstate.Error); ok {
		return le.Code
	}
	return ""
}

// losesFirstAnswer commits the first command of type T it is asked for,
// then reports ErrUnknownOutcome for it, as after a forwarding connection
// broke once the leader had the entry.
type losesFirstAnswer[T lockstate.Command] struct {
	*raftnode.Node
	mu   sync.Mutex
	lost bool
}

func (u *losesFirstAnswer[T]) Propose(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error) {
	res, index, err := u.Node.Propose(ctx, cmd)
	if _, ok := cmd.(T); ok && err == nil {
		u.mu.Lock()
		first := !u.lost
		u.lost = true
		u.mu.Unlock()
		if first {
			return nil, 0, fmt.Errorf("test: %w", raftnode.ErrUnknownOutcome)
		}
	}
	return res, index, err
}

// unknownFirst commits the first command of type T it is asked for,
// whatever the table answers, runs between, and then reports
// ErrUnknownOutcome for it: another caller's command lands between an
// attempt and its repeat.
type unknownFirst[T lockstate.Command] struct {
	*raftnode.Node
	between func()
	once    sync.Once
}

func (u *unknownFirst[T]) Propose(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error) {
	res, index, err := u.Node.Propose(ctx, cmd)
	if _, ok := cmd.(T); ok {
		first := false
		u.once.Do(func() { first = true })
		if first {
			u.between()
			return nil, 0, fmt.Errorf("test: %w", raftnode.ErrUnknownOutcome)
		}
	}
	return res, index, err
}
