// Package faultfstest mounts faultfs mirrors for tests. Each is served
// by a child process (the test binary run again, faultfs.StartChild), so
// that no test process waits on a mount it serves itself; and a test
// that still hangs on one is cut by its own deadline, never by go test's
// or CI's: its mount is aborted and detached, so that its calls on it
// fail (ECONNABORTED, ENOTCONN), and the test fails naming the mount. If
// the test process cannot run its watchdog then (a collection stopped its
// world for a thread held by a page fault on the mount), the child cuts
// the mount itself a little later.
//
// A test binary that mounts mirrors calls Main from its TestMain.
package faultfstest

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/faultfs"
)

// Main is the TestMain of a test binary whose tests call Mount: in a
// child Mount started it serves a mirror, otherwise it runs the tests.
func Main(m *testing.M) {
	faultfs.ServeChild()
	os.Exit(m.Run())
}

// The watchdog's deadline for a test: at most maxWait, and margin before
// go test's -timeout where that comes sooner. The child cuts the mount
// itself backstop later, where the watchdog could not run.
const (
	maxWait  = 2 * time.Minute
	margin   = 15 * time.Second
	backstop = 5 * time.Second
)

// Mount mirrors backing at mountpoint (both existing directories) from a
// child process until the end of t: a cleanup unmounts it, after those
// registered later (where t closes what it keeps open there). It skips t
// where FUSE cannot be mounted (not root, no /dev/fuse, mounts not
// allowed). t fails if the child dies before, and if t runs past its
// deadline (2 minutes, or sooner if go test's -timeout comes first): the
// mount is cut then.
func Mount(t *testing.T, backing, mountpoint string) *faultfs.Remote {
	t.Helper()
	return mount(t, backing, mountpoint, deadline(t), t.Errorf)
}

// MountTemp is Mount of a fresh directory at another; it returns the
// mirror and where it is mounted.
func MountTemp(t *testing.T) (*faultfs.Remote, string) {
	t.Helper()
	dir := t.TempDir()
	return Mount(t, t.TempDir(), dir), dir
}

// deadline is how long t may use a mount.
func deadline(t *testing.T) time.Duration {
	wait := maxWait
	if end, ok := t.Deadline(); ok {
		left := time.Until(end)
		wait = min(wait, max(left-margin, left/2))
	}
	return wait
}

// mount is Mount with the watchdog's deadline and what it reports to
// (the test's Errorf, but for the watchdog's own tests).
func mount(t *testing.T, backing, mountpoint string, wait time.Duration, report func(string, ...any)) *faultfs.Remote {
	t.Helper()
	r := start(t, backing, mountpoint, wait+backstop)
	stop, stopped := make(chan struct{}), make(chan struct{})
	var cut atomic.Bool
	go func() {
		defer close(stopped)
		if err := watch(t.Name(), r, mountpoint, wait, stop); err != nil {
			cut.Store(true)
			report("%v", err)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-stopped
		if err := r.Unmount(); err != nil && !cut.Load() { // a cut was reported when made
			report("%v", err)
		}
	})
	return r
}

// watch watches the mount of test until stop: if its child exits
// before the test unmounted it, it detaches what the child left; if the
// test still runs after wait, it cuts the mount. It returns what
// happened, nil if nothing went wrong.
func watch(test string, r *faultfs.Remote, mountpoint string, wait time.Duration, stop <-chan struct{}) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	select {
	case <-stop:
		return nil
	case <-r.Exited():
		if err = r.Unmount(); err == nil { // the test unmounted it
			return nil
		}
		err = fmt.Errorf("faultfstest: %s: %w", test, err) // says how the child ended
	case <-timer.C:
		cause := fmt.Errorf("faultfstest: %s still ran %v after mounting %s: the mount is cut (FUSE connection aborted, its child killed, the mount detached)", test, wait, mountpoint)
		err = errors.Join(cause, r.Cut(cause))
	}
	// Also said at once: a test that maps a file there may die of SIGBUS
	// at its next page fault, before its failure is reported.
	fmt.Fprintln(os.Stderr, err)
	return err
}

// start starts a child mirroring backing at mountpoint, which cuts the
// mount itself within after; it skips t where FUSE cannot be mounted.
func start(t *testing.T, backing, mountpoint string, within time.Duration) *faultfs.Remote {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("FUSE mounts need root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	r, err := faultfs.StartChild(backing, mountpoint, within)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENODEV) {
		t.Skipf("FUSE mounts are not allowed here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}
