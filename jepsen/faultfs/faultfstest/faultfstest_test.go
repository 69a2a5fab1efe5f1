package faultfstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockd/lockd/jepsen/faultfs"
)

func TestMain(m *testing.M) { Main(m) }

// reports keeps what a mount reported instead of failing the test.
type reports struct {
	mu    sync.Mutex
	msgs  []string
	first chan struct{} // closed at the first report
}

func newReports() *reports { return &reports{first: make(chan struct{})} }

func (r *reports) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	if len(r.msgs) == 1 {
		close(r.first)
	}
}

func (r *reports) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// mirror mounts a mirror of a fresh directory at another, cut after
// wait by the watchdog, or after limit by the child itself if that is
// shorter (no watchdog then); it returns the mirror, a file open on it,
// and where it is mounted. ok is false if the file is not on the mount:
// the mount was cut first, on a machine too busy to open it in time.
func mirror(t *testing.T, wait, limit time.Duration, rep *reports) (r *faultfs.Remote, file *os.File, dir string, ok bool) {
	t.Helper()
	dir = t.TempDir()
	var under, st unix.Stat_t
	if err := unix.Stat(dir, &under); err != nil {
		t.Fatal(err)
	}
	if limit < wait {
		r = start(t, t.TempDir(), dir, limit)
		t.Cleanup(func() { _ = r.Unmount() }) // if the test ends first
	} else {
		r = mount(t, t.TempDir(), dir, wait, rep.add)
	}
	file, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() }) // before the unmount
	_, werr := file.Write([]byte("written"))
	serr := unix.Fstat(int(file.Fd()), &st)
	for _, err := range []error{werr, serr} {
		if err != nil && !aborted(err) {
			t.Fatal(err)
		}
	}
	return r, file, dir, werr == nil && serr == nil && st.Dev != under.Dev
}

// untilMounted runs try with a short limit, then twice as long, until
// its file was open on the mount before the cut.
func untilMounted(t *testing.T, try func(limit time.Duration) bool) {
	t.Helper()
	for limit := 2 * time.Second; !try(limit); limit *= 2 {
		t.Logf("the mount was cut before the test was ready: again with %v", 2*limit)
	}
}

// within runs f and returns its error, failing t if it takes a minute:
// a call on a cut mount must come back long before.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: still waiting a minute on", what)
		return nil
	}
}

// stop stops the child p as a deadlocked server would be: it answers
// nothing, neither its mount nor its parent. It returns once every
// thread of p stopped (kill returns before: one thread takes the signal,
// and stops the others when it runs), or false if p was gone.
func stop(t *testing.T, p *os.Process) bool {
	t.Helper()
	if err := p.Signal(syscall.SIGSTOP); errors.Is(err, os.ErrProcessDone) {
		return false
	} else if err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	// WNOWAIT: the stop stays to be waited for, by no one; os/exec's Wait
	// waits for the exit only.
	err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
	if errors.Is(err, unix.ECHILD) {
		return false
	}
	if err != nil {
		t.Fatalf("wait for the child to stop: %v", err)
	}
	return true
}

// aborted reports whether err is how a call on an aborted FUSE
// connection fails: ECONNABORTED if it was waiting, ENOTCONN if made
// after.
func aborted(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// gone checks that the child exited and nothing is left mounted at dir.
func gone(t *testing.T, pid int, dir string) {
	t.Helper()
	if on, err := faultfs.Mounted(dir); on || err != nil {
		t.Errorf("a mirror still mounted at %s: %v, %v", dir, on, err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the child (pid %d) is still there: %v", pid, err)
	}
}

// TestStoppedChildFailsAtTheDeadline: a child that answers nothing
// (stopped, as a deadlocked server would be) holds a read on its mount
// until the test's deadline, and no longer: the read fails, the mount is
// gone, and the test is told, naming the mount.
func TestStoppedChildFailsAtTheDeadline(t *testing.T) {
	untilMounted(t, func(wait time.Duration) bool {
		rep := newReports()
		r, file, dir, ok := mirror(t, wait, time.Hour, rep)
		if !ok || !stop(t, r.Process()) {
			return false
		}
		err := within(t, "a read on a stopped child's mount", func() error { _, err := file.ReadAt(make([]byte, 1), 0); return err })
		if !aborted(err) {
			t.Errorf("read on a stopped child's mount: %v, want ENOTCONN or ECONNABORTED once cut", err)
		}
		within(t, "the watchdog's report", func() error { <-rep.first; return nil }) // made once the cut is done
		if got := rep.String(); !strings.Contains(got, dir) || !strings.Contains(got, "cut") {
			t.Errorf("reported %q, want the cut of %s", got, dir)
		}
		gone(t, r.Process().Pid, dir)
		if n := r.Failed(); n != -1 {
			t.Errorf("Failed() after the cut = %d, want -1", n)
		}
		if err := r.Unmount(); err == nil || !strings.Contains(err.Error(), "still ran") {
			t.Errorf("Unmount after the cut: %v, want the cause", err)
		}
		return true
	})
}

// TestKilledChildFailsAtOnce: a child that died fails the calls on its
// mount at once, and the calls to it; Unmount says how it ended, and
// leaves nothing mounted.
func TestKilledChildFailsAtOnce(t *testing.T) {
	rep := newReports()
	r, file, dir, ok := mirror(t, time.Minute, time.Hour, rep)
	if !ok {
		t.Fatal("the mount was cut before the test could open a file on it")
	}
	if err := r.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	within(t, "the child's death", func() error { <-r.Exited(); return nil })
	err := within(t, "a read on a dead child's mount", func() error { _, err := file.ReadAt(make([]byte, 1), 0); return err })
	if !aborted(err) {
		t.Errorf("read on a dead child's mount: %v, want ENOTCONN or ECONNABORTED", err)
	}
	r.FailWrites(true)
	err = within(t, "Unmount", r.Unmount)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Unmount of a dead child's mount: %v, want how it ended", err)
	}
	gone(t, r.Process().Pid, dir)
	if got := rep.String(); got != "" && !strings.Contains(got, "killed") {
		t.Errorf("reported %q", got)
	}
}

// TestUnansweredCallFails: a call to a child that does not answer ends
// at its own deadline, and cuts the mount: what waited on it fails.
func TestUnansweredCallFails(t *testing.T) {
	rep := newReports()
	r, file, dir, ok := mirror(t, time.Minute, time.Hour, rep)
	if !ok || !stop(t, r.Process()) {
		t.Fatal("the mount was cut before the test could stop its child")
	}
	r.Timeout = time.Second
	read := make(chan error, 1)
	go func() { _, err := file.ReadAt(make([]byte, 1), 0); read <- err }()
	var n int64
	within(t, "BadReads", func() error { n = r.BadReads(); return nil })
	if n != -1 {
		t.Errorf("BadReads() of a stopped child = %d, want -1", n)
	}
	if err := within(t, "the read waiting on the mount", func() error { return <-read }); !aborted(err) {
		t.Errorf("read on the mount of a stopped child: %v, want ENOTCONN or ECONNABORTED once cut", err)
	}
	gone(t, r.Process().Pid, dir)
	if err := r.Unmount(); err == nil || !strings.Contains(err.Error(), "no answer in 1s") {
		t.Errorf("Unmount: %v, want the call that had no answer", err)
	}
}

// TestChildFailsItsMountAtItsLimit: with no watchdog in this process
// (the backstop for one that cannot run), the child cuts its mount by
// itself at the limit it was given: a file open there fails from then on,
// and nothing is left mounted.
func TestChildFailsItsMountAtItsLimit(t *testing.T) {
	untilMounted(t, func(limit time.Duration) bool {
		r, file, dir, ok := mirror(t, time.Hour, limit, nil)
		if !ok {
			return false
		}
		within(t, "the child's exit at its limit", func() error { <-r.Exited(); return nil })
		if _, err := file.Write([]byte("late")); !aborted(err) {
			t.Errorf("write on a mount cut by its child: %v, want ENOTCONN or ECONNABORTED", err)
		}
		gone(t, r.Process().Pid, dir)
		if err := r.Unmount(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("Unmount of a mount its child cut: %v, want how the child ended", err)
		}
		return true
	})
}
