//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/cmd/lockd/lockdtest"
)

// Binaries TestMain built (empty with -short, which skips the tests that
// need them).
var lockdBin, lockctlBin string

// TestMain builds cmd/lockd and cmd/lockctl once, like cmd/lockd/e2e, and
// kills any process a failed test left behind.
func TestMain(m *testing.M) {
	lockdtest.Main(m, "lockctl tests", map[string]*string{"cmd/lockd": &lockdBin, "cmd/lockctl": &lockctlBin})
}

// needBinaries skips the test in -short mode.
func needBinaries(t *testing.T) {
	t.Helper()
	if testing.Short() || lockdBin == "" {
		t.Skip("runs real lockd and lockctl processes; skipped with -short")
	}
}

// startDev starts `lockd --dev` on a free port, waits until it leads and
// returns its address; the node is stopped in t.Cleanup.
func startDev(t *testing.T) string {
	t.Helper()
	addr, _ := startDevProc(t, "")
	return addr
}

// startDevProc is startDev that also returns the lockd process. A pki
// directory (of `lockd tls init --node dev`) makes it serve HTTPS to
// clients with a certificate (--tls-client-auth).
func startDevProc(t *testing.T, pki string, extra ...string) (string, *os.Process) {
	t.Helper()
	needBinaries(t)
	// The port is free when picked, but another test that picks ports
	// may take it before lockd binds it: then lockd exits, and a new port
	// is tried.
	for attempt := 1; ; attempt++ {
		addr, proc, log := startDevOn(t, pki, extra...)
		if proc != nil {
			return addr, proc
		}
		if !strings.Contains(log, "address already in use") || attempt == 3 {
			t.Fatalf("lockd exited:\n%s", log)
		}
		t.Logf("port of %s taken before lockd bound it; trying another", addr)
	}
}

// startDevOn starts `lockd --dev` on a port free a moment before and
// waits until it leads; nil and its log when it exited first.
func startDevOn(t *testing.T, pki string, extra ...string) (string, *os.Process, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", lockdtest.FreePorts(t, 1)[0])
	logf := filepath.Join(t.TempDir(), "lockd.log")
	out, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	// A data dir of the test's: a --dev node killed by a test cannot remove its own.
	args := append([]string{"--dev", "--data-dir", t.TempDir(), "--http-addr", addr, "--log-level", "warn",
		"--raft-timing", lockdtest.TimingFlag(0.1)}, extra...)
	hc, base := http.DefaultClient, "http://"+addr
	if pki != "" {
		ca, cert, key := filepath.Join(pki, "ca.pem"), filepath.Join(pki, "dev.pem"), filepath.Join(pki, "dev-key.pem")
		args = append(args, "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key, "--tls-client-auth")
		cfg, err := client.TLSConfig(ca, cert, key) // a node certificate is a client certificate too
		if err != nil {
			t.Fatal(err)
		}
		hc, base = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, "https://"+addr
	}
	cmd := exec.Command(lockdBin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := lockdtest.Start(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); lockdtest.Exited(cmd); out.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // in case a test stopped it
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf)
			t.Logf("lockd log:\n%s", b)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		var st struct {
			State string `json:"state"`
		}
		if err := getJSONWith(hc, base+"/v1/status", &st); err == nil && st.State == "leader" {
			return addr, cmd.Process, ""
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logf)
			return addr, nil, string(b)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("lockd --dev did not lead within 15s")
		}
	}
}

// getJSON GETs path on addr and decodes a 200 answer into out.
func getJSON(addr, path string, out any) error {
	return getJSONWith(http.DefaultClient, "http://"+addr+path, out)
}

// getJSONWith GETs url with hc and decodes a 200 answer into out.
func getJSONWith(hc *http.Client, url string, out any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// lockctlProc is a started lockctl.
type lockctlProc struct {
	cmd            *exec.Cmd
	stdout, stderr lockdtest.Buffer
	done           chan struct{}
	code           int
}

// startLockctl starts lockctl with LOCKD_ADDR=addr in dir.
func startLockctl(t *testing.T, addr, dir string, args ...string) *lockctlProc {
	t.Helper()
	p := &lockctlProc{done: make(chan struct{})}
	p.cmd = exec.Command(lockctlBin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), "LOCKD_ADDR="+addr)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := lockdtest.Start(p.cmd); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		lockdtest.Exited(p.cmd)
		p.code = p.cmd.ProcessState.ExitCode()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.code = -1000
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits up to timeout for p to exit and returns its exit code.
func (p *lockctlProc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("lockctl %s did not exit within %v\nstdout: %s\nstderr: %s",
			strings.Join(p.cmd.Args[1:], " "), timeout, &p.stdout, &p.stderr)
		return 0
	}
}

// lockctl runs lockctl to completion and returns its exit code and output.
func lockctl(t *testing.T, addr string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := startLockctl(t, addr, t.TempDir(), args...)
	code = p.wait(t, 30*time.Second)
	return code, p.stdout.String(), p.stderr.String()
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
