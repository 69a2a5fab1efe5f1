//go:build linux

// Package lockdtest builds the project's binaries and starts them as child
// processes for end-to-end tests (cmd/lockd/e2e, cmd/lockctl, api/client).
//
// Processes are started from one OS thread that never exits, with
// PR_SET_PDEATHSIG=SIGKILL, so even a test binary that dies (a -timeout
// panic, a SIGKILL) takes its children with it; ReapAll kills whatever a
// test forgot.
package lockdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
)

// Build builds github.com/lockd/lockd/<pkg> (e.g. "cmd/lockd") statically
// into dir and returns the binary's path.
func Build(dir, pkg string) (string, error) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return "", fmt.Errorf("no go command: %w", err)
		}
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/lockd/lockd/"+pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// spawnc carries process starts to the spawner goroutine, whose OS thread
// lives as long as the test process: PR_SET_PDEATHSIG fires when the
// thread that forked the child exits, not the process.
var (
	spawnc    = make(chan func())
	spawnOnce sync.Once
)

func spawner() {
	runtime.LockOSThread()
	for f := range spawnc {
		f()
	}
}

var live = struct {
	sync.Mutex
	m map[*exec.Cmd]struct{}
}{m: make(map[*exec.Cmd]struct{})}

// Start starts cmd so that it dies with the test process, and tracks it
// until Exited.
func Start(cmd *exec.Cmd) error {
	spawnOnce.Do(func() { go spawner() })
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

// Exited stops tracking cmd once it has been waited for.
func Exited(cmd *exec.Cmd) {
	live.Lock()
	delete(live.m, cmd)
	live.Unlock()
}

// ReapAll kills every started process not yet reported Exited and returns
// how many there were: a TestMain fails the run when it is not 0.
func ReapAll() int {
	live.Lock()
	defer live.Unlock()
	for cmd := range live.m {
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	return len(live.m)
}
