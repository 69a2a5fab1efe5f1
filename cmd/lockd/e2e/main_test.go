//go:build linux

// Package e2e runs real lockd processes on loopback and drives them only
// through the HTTP API: cluster formation, leader loss, session expiry,
// restarts and quorum loss.
//
// TestMain builds cmd/lockd once (without -race: the race detector covers
// the test process only). Every test starts its own cluster with fresh
// data dirs and free ports and kills every process it started in
// t.Cleanup. Processes are started from one OS thread that never exits,
// with PR_SET_PDEATHSIG=SIGKILL, so even a test binary that dies (a
// -timeout panic, a SIGKILL) takes its lockd children with it.
//
// Environment:
//
//	LOCKD_E2E_RAFT_TIMING  --raft-timing for every node (default 1, production)
//	LOCKD_E2E_LOG_LEVEL    --log-level for every node (default info)
//	LOCKD_E2E_LOGS=1       print every node's log tail even when a test passes
//	LOCKD_E2E_LONG=1       also run the slow snapshot catch-up test (~5 min)
package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockdBin is the binary TestMain built; empty in -short mode.
var lockdBin string

func TestMain(m *testing.M) {
	flag.Parse()
	go spawner()
	dir, err := os.MkdirTemp("", "lockd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	if !testing.Short() {
		lockdBin, err = buildLockd(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: build lockd:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	if n := reapAll(); n > 0 {
		fmt.Fprintf(os.Stderr, "e2e: %d lockd process(es) were still running after the tests; killed them\n", n)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildLockd builds github.com/lockd/lockd/cmd/lockd into dir.
func buildLockd(dir string) (string, error) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return "", fmt.Errorf("no go command: %w", err)
		}
	}
	bin := filepath.Join(dir, "lockd")
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/lockd/lockd/cmd/lockd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: built lockd in %v\n", time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// needBinary skips the test in -short mode (no binary was built).
func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() || lockdBin == "" {
		t.Skip("e2e: real lockd processes; skipped with -short")
	}
}

// spawnc carries process starts to the spawner goroutine.
var spawnc = make(chan func())

// spawner starts every child from one locked OS thread that lives as long
// as the test process: PR_SET_PDEATHSIG fires when the *thread* that forked
// the child exits, so an ordinary goroutine's thread could kill children
// early (or a thread the runtime retires could).
func spawner() {
	runtime.LockOSThread()
	for f := range spawnc {
		f()
	}
}

// startProcess starts cmd from the spawner thread with PDEATHSIG=SIGKILL
// and registers it until it has been waited for.
func startProcess(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	errc := make(chan error, 1)
	spawnc <- func() { errc <- cmd.Start() }
	if err := <-errc; err != nil {
		return err
	}
	live.Lock()
	live.m[cmd] = struct{}{}
	live.Unlock()
	return nil
}

// processExited unregisters a process once Wait has returned.
func processExited(cmd *exec.Cmd) {
	live.Lock()
	delete(live.m, cmd)
	live.Unlock()
}

// live is every started lockd process not yet waited for.
var live = struct {
	sync.Mutex
	m map[*exec.Cmd]struct{}
}{m: make(map[*exec.Cmd]struct{})}

// reapAll SIGKILLs whatever is still registered (a test's cleanup failed)
// and returns how many there were.
func reapAll() int {
	live.Lock()
	defer live.Unlock()
	for cmd := range live.m {
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	return len(live.m)
}
