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
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// buildFlags are the go build flags of the binaries Build builds: the
// build tags the test binary was built with (faults.go), so that the
// tests of the jepsen suite's build run its lockd.
var buildFlags []string

// Build builds github.com/lockd/lockd/<pkg> (e.g. "cmd/lockd") statically
// into dir and returns the binary's path. It also notes the source files
// the binary is built from, which Start looks at (inputs).
func Build(dir, pkg string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command: %w", err)
	}
	path := "github.com/lockd/lockd/" + pkg
	if err := inputs.note(goTool, path); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command(goTool, slices.Concat([]string{"build"}, buildFlags, []string{"-o", bin, path})...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// inputs are the files of this module that the binaries Build built are
// made from, with go.mod and go.sum. go test caches a test binary's
// result together with the files it opened or statted while its tests
// ran (and the environment variables it read), and reports it again only
// while they are unchanged; a binary built from sources the tests never
// looked at would be tested once and its old result reported ever after.
// So the first Start stats them all: a test that starts a built binary
// makes its result depend on that binary's sources. (Build runs before
// m.Run, when go test does not yet record what the binary looks at.)
var inputs = new(buildInputs)

// buildInputs: see inputs.
type buildInputs struct {
	sync.Mutex
	names []string
	once  sync.Once
}

// note adds the sources of the package at path to inputs.
func (in *buildInputs) note(goTool, path string) error {
	const files = `{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}` +
		`{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}` +
		`{{end}}{{end}}`
	out, err := exec.Command(goTool, slices.Concat([]string{"list"}, buildFlags, []string{"-deps", "-f", files, path})...).Output()
	if err != nil {
		return fmt.Errorf("list the sources of %s: %w", path, err)
	}
	names := strings.Fields(string(out))
	if mod, err := exec.Command(goTool, "env", "GOMOD").Output(); err == nil && len(bytes.TrimSpace(mod)) > 0 {
		gomod := string(bytes.TrimSpace(mod))
		names = append(names, gomod, strings.TrimSuffix(gomod, ".mod")+".sum")
	}
	in.Lock()
	in.names = append(in.names, names...)
	in.Unlock()
	return nil
}

// look stats every input once per test binary (see inputs).
func (in *buildInputs) look() {
	in.once.Do(func() {
		in.Lock()
		defer in.Unlock()
		for _, name := range in.names {
			_, _ = os.Stat(name) // recorded by go test, also when missing
		}
	})
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
	inputs.look()
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

// Main is a test binary's TestMain: it builds each package named in bins
// (e.g. "cmd/lockd") into a temporary directory and stores the binary's
// path in the variable it points to (nothing is built with -short), runs
// the tests, fails the run if any started process was still running (and
// kills it), and removes the binaries. name prefixes its messages.
func Main(m *testing.M, name string, bins map[string]*string) {
	os.Exit(Run(m, name, bins))
}

// Run is Main returning the exit code instead of exiting, for a TestMain
// that has something of its own to stop afterwards.
func Run(m *testing.M, name string, bins map[string]*string) int {
	flag.Parse()
	return run(m, name, bins)
}

func run(m *testing.M, name string, bins map[string]*string) int {
	dir, err := os.MkdirTemp("", "lockdtest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if !testing.Short() {
		pkgs := make([]string, 0, len(bins))
		for pkg := range bins {
			pkgs = append(pkgs, pkg)
		}
		slices.Sort(pkgs)
		for _, pkg := range pkgs {
			if *bins[pkg], err = Build(dir, pkg); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
				return 1
			}
		}
	}
	code := m.Run()
	if n := ReapAll(); n > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d process(es) were still running after the tests; killed them\n", name, n)
		code = 1
	}
	return code
}
