package faultfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Waits of a Remote on its child.
const (
	// callWait bounds a call (StartChild's mount too) unless
	// Remote.Timeout says otherwise: each is a few system calls, an
	// Unmount at most unmountWait and a detach.
	callWait = 30 * time.Second
	// exitWait bounds the wait for a child to exit once it is done or
	// killed.
	exitWait = 10 * time.Second
)

// Remote is a mirror served by a child process (StartChild), for a
// process that uses the mount itself: one that serves a mount and also
// waits on it (a page fault on a file it maps, a collection stopping the
// world while a request is in flight) can deadlock with itself. Its
// methods are FS's, each a call to the child with its own deadline. A
// call that fails (the child died, or did not answer in time) cuts the
// mount (Cut); counts are then -1, and Unmount returns the failure.
type Remote struct {
	// Timeout bounds each call after StartChild (30 s if 0).
	Timeout time.Duration

	mountpoint string   // as given
	real       string   // absolute, without symlinks: as the mount table names it
	conn       uint32   // the FUSE connection, once mounted
	abort      *os.File // its abort file in fusectl, opened once mounted (nil if none)
	cmd        *exec.Cmd
	in         *os.File // the child's stdin: closed, the child unmounts and exits
	enc        *json.Encoder
	replies    chan reply    // the child's answers, closed at the end of its stdout
	readErr    error         // why its stdout ended, once replies is closed
	exited     chan struct{} // closed once the child exited
	waitErr    error         // how it exited, once exited is closed

	mu       sync.Mutex // one call at a time
	unsynced int64      // Unsynced as the child counted it at Unmount; -1 before
	done     bool       // Unmount called

	failMu  sync.Mutex
	failure error // the first call that failed, or the cause of the cut
	cutOnce sync.Once
	cutErr  error

	unmountOnce sync.Once
	unmountErr  error
}

// StartChild mirrors backing at mountpoint (both existing directories)
// from a child process until Unmount: this program run again, which must
// call ServeChild first thing. An error from the child's Mount wraps the
// errno it wrapped there (errors.Is(err, syscall.EPERM) works).
//
// With within > 0, the child cuts the mount itself if it is still
// mounted within after, and exits: a backstop for a process whose own
// watchdog (Cut) cannot run, its runtime stopped by a thread that waits
// on the mount.
func StartChild(backing, mountpoint string, within time.Duration) (*Remote, error) {
	if os.Getenv(childEnv) != "" {
		return nil, errors.New("faultfs: a mirror's child starts no child of its own")
	}
	r := &Remote{mountpoint: mountpoint, unsynced: -1, replies: make(chan reply, 1), exited: make(chan struct{})}
	var err error
	if r.real, err = realPath(mountpoint); err != nil {
		return nil, err
	}
	if err := r.start(); err != nil {
		return nil, err
	}
	rep, err := r.call(request{Op: opMount, Backing: backing, Mountpoint: r.real, Within: within}, callWait)
	if err != nil {
		_ = r.Cut(err) // its child gone, and any mount it made
		return nil, err
	}
	r.conn = rep.Conn
	r.abort = openAbort(r.conn)
	return r, nil
}

// start starts the child, with pipes of its own for its stdin and
// stdout (its stderr is this process's).
func (r *Remote) start() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("faultfs: start a child: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("faultfs: start a child: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return fmt.Errorf("faultfs: start a child: %w", err)
	}
	// -test.run=^$: a test binary that does not call ServeChild runs no
	// test instead of this one again.
	r.cmd = exec.Command(exe, "-test.run=^$")
	// Built with -race, a process sleeps a second at exit for reports
	// that other threads may still make: the child has no such threads
	// left once it unmounted, and each Unmount waits for its exit.
	r.cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	r.cmd.Stdin, r.cmd.Stdout, r.cmd.Stderr = inR, outW, os.Stderr
	err = r.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return fmt.Errorf("faultfs: start a child: %w", err)
	}
	r.in, r.enc = inW, json.NewEncoder(inW)
	go r.read(outR)
	go func() {
		r.waitErr = r.cmd.Wait()
		close(r.exited)
	}()
	return nil
}

// read passes the child's answers on until its stdout ends.
func (r *Remote) read(out *os.File) {
	defer close(r.replies)
	defer out.Close()
	dec := json.NewDecoder(out)
	for {
		var rep reply
		if err := dec.Decode(&rep); err != nil {
			r.readErr = err
			return
		}
		r.replies <- rep
	}
}

// call sends req and waits up to wait for the answer. An error the child
// answered is a *childError; any other failure cuts the mount and stays:
// every later call returns it.
func (r *Remote) call(req request, wait time.Duration) (reply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failed(); err != nil {
		return reply{}, err
	}
	if r.done {
		return reply{}, fmt.Errorf("faultfs: %s at %s after Unmount", req.Op, r.mountpoint)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	sent := make(chan error, 1)
	go func() { sent <- r.enc.Encode(req) }() // a stopped child may leave it blocked until the cut
	var err error
	select {
	case err = <-sent:
		if err != nil { // its stdin is closed: it exited, most likely
			err = r.gone(err)
		}
	case <-timer.C:
		err = fmt.Errorf("not taken in %v", wait)
	}
	if err == nil {
		select {
		case rep, ok := <-r.replies:
			if ok {
				return rep, rep.err()
			}
			err = r.gone(fmt.Errorf("the child (pid %d) closed its stdout: %v", r.cmd.Process.Pid, r.readErr))
		case <-timer.C:
			err = fmt.Errorf("no answer in %v", wait)
		}
	}
	err = fmt.Errorf("faultfs: the child serving %s: %s: %w", r.mountpoint, req.Op, err)
	_ = r.Cut(err)
	return reply{}, err
}

// gone says how the child exited once a pipe to it failed, or else how
// the pipe failed.
func (r *Remote) gone(pipe error) error {
	select {
	case <-r.exited:
		if r.waitErr == nil { // ServeChild exits 0 only when told to, or when its parent is gone
			return fmt.Errorf("the child (pid %d) exited 0 before it answered: does this program call faultfs.ServeChild first thing (faultfstest.Main in TestMain)?", r.cmd.Process.Pid)
		}
		return fmt.Errorf("the child (pid %d) ended: %v (its stderr went to this process's)", r.cmd.Process.Pid, r.waitErr)
	case <-time.After(exitWait):
		return pipe
	}
}

// failed is the failure every call returns now, nil if none.
func (r *Remote) failed() error {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	return r.failure
}

// Cut ends the mount at once, however its child is (stopped, hung,
// dead): it aborts the FUSE connection, so that every call on the mount
// fails (ECONNABORTED if it was waiting, ENOTCONN if made after), kills
// the child, and detaches the mount. Every later call to the child fails
// with cause, and so does Unmount. It returns an error if the mount could
// not be detached, or the child outlived SIGKILL.
func (r *Remote) Cut(cause error) error {
	r.failMu.Lock()
	if r.failure == nil {
		r.failure = cause
	}
	r.failMu.Unlock()
	r.cutOnce.Do(func() {
		if r.abort != nil { // fails once the connection is gone: it can reach no other mount
			_, _ = r.abort.Write([]byte("1"))
		}
		_ = r.cmd.Process.Kill()
		r.in.Close()
		r.cutErr = detach(r.real, r.conn)
		select {
		case <-r.exited:
		case <-time.After(exitWait):
			r.cutErr = errors.Join(r.cutErr, fmt.Errorf("faultfs: the child serving %s (pid %d) outlived SIGKILL by %v", r.mountpoint, r.cmd.Process.Pid, exitWait))
		}
	})
	return r.cutErr
}

// Process is the child, for a test that stops or kills it to see how
// what uses the mount copes.
func (r *Remote) Process() *os.Process { return r.cmd.Process }

// Exited is closed once the child exited: after Unmount, or when it
// died or cut its mount itself (StartChild's within).
func (r *Remote) Exited() <-chan struct{} { return r.exited }

// Unmount ends the mirror and its child; it returns the failure of any
// call before, or how the child ended if it failed (a race report makes
// a child's exit status 66). Called again, it returns the same.
func (r *Remote) Unmount() error {
	r.unmountOnce.Do(func() { r.unmountErr = r.unmount() })
	return r.unmountErr
}

func (r *Remote) unmount() error {
	rep, err := r.call(request{Op: opUnmount}, r.timeout())
	_, answered := err.(*childError)
	answered = answered || err == nil
	r.mu.Lock()
	r.done = true
	if answered {
		r.unsynced = rep.N
	}
	r.mu.Unlock()
	if r.abort != nil {
		defer r.abort.Close()
	}
	if !answered {
		return err // the mount is cut
	}
	r.in.Close()
	select {
	case <-r.exited:
		if r.waitErr != nil {
			err = errors.Join(err, fmt.Errorf("faultfs: the child serving %s: %w (its stderr went to this process's)", r.mountpoint, r.waitErr))
		}
	case <-time.After(exitWait):
		cause := fmt.Errorf("faultfs: the child serving %s did not exit in %v after Unmount", r.mountpoint, exitWait)
		err = errors.Join(err, cause, r.Cut(cause))
	}
	return err
}

// timeout is the deadline of one call.
func (r *Remote) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return callWait
}

// do makes a call whose only answer is whether it worked: a failure cuts
// the mount, and Unmount returns it.
func (r *Remote) do(req request) {
	_, _ = r.call(req, r.timeout())
}

// count makes a call answered by a count; -1 if it failed.
func (r *Remote) count(op string) int64 {
	rep, err := r.call(request{Op: op}, r.timeout())
	if err != nil {
		return -1
	}
	return rep.N
}

// FailWrites makes every write fail with EIO (on) or pass (off).
func (r *Remote) FailWrites(on bool) { r.do(request{Op: opFailWrites, On: on}) }

// Failed counts the calls answered EIO so far.
func (r *Remote) Failed() int64 { return r.count(opFailed) }

// FailReads makes every read of a file fail with EIO (on) or work.
func (r *Remote) FailReads(on bool) { r.do(request{Op: opFailReads, On: on}) }

// CorruptReads makes every read of a file return the bytes asked for
// with one of them changed (on), or work.
func (r *Remote) CorruptReads(on bool) { r.do(request{Op: opCorruptReads, On: on}) }

// BadReads counts the reads failed or changed so far.
func (r *Remote) BadReads() int64 { return r.count(opBadReads) }

// Unsynced counts the files the mirror keeps open for a power loss; after
// Unmount, as the child counted them once unmounted.
func (r *Remote) Unsynced() int {
	r.mu.Lock()
	if r.done {
		defer r.mu.Unlock()
		return int(r.unsynced)
	}
	r.mu.Unlock()
	return int(r.count(opUnsynced))
}

// PowerLoss is FS.PowerLoss in the child; with tear, its tears follow a
// seed drawn from tear.
func (r *Remote) PowerLoss(tear *rand.Rand) (Loss, error) {
	var seed int64
	for tear != nil && seed == 0 {
		seed = tear.Int63()
	}
	rep, err := r.call(request{Op: opPowerLoss, Seed: seed}, r.timeout())
	return rep.Loss, err
}
