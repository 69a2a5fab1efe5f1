//go:build linux

package client_test

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

// lockdBin is the lockd binary TestMain built for the cluster tests
// (empty with -short, which skips them).
var lockdBin string

// TestMain builds cmd/lockd once, like cmd/lockd/e2e, and reaps any
// lockd process a failed test left behind.
func TestMain(m *testing.M) {
	flag.Parse()
	go spawner()
	dir, err := os.MkdirTemp("", "lockd-client-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "client tests:", err)
		os.Exit(1)
	}
	if !testing.Short() {
		if lockdBin, err = buildLockd(dir); err != nil {
			fmt.Fprintln(os.Stderr, "client tests: build lockd:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	if n := reapAll(); n > 0 {
		fmt.Fprintf(os.Stderr, "client tests: killed %d lockd process(es) still running\n", n)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

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
	fmt.Fprintf(os.Stderr, "client tests: built lockd in %v\n", time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// spawnc carries process starts to the spawner goroutine, whose OS
// thread lives as long as the test process: PR_SET_PDEATHSIG fires when
// the thread that forked the child exits.
var spawnc = make(chan func())

func spawner() {
	runtime.LockOSThread()
	for f := range spawnc {
		f()
	}
}

// startProcess starts cmd with PDEATHSIG=SIGKILL, so even a test binary
// that dies takes its lockd children with it.
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

func processExited(cmd *exec.Cmd) {
	live.Lock()
	delete(live.m, cmd)
	live.Unlock()
}

var live = struct {
	sync.Mutex
	m map[*exec.Cmd]struct{}
}{m: make(map[*exec.Cmd]struct{})}

func reapAll() int {
	live.Lock()
	defer live.Unlock()
	for cmd := range live.m {
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	return len(live.m)
}
