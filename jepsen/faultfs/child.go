package faultfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// childEnv marks a process StartChild started: its ServeChild serves a
// mirror instead of returning.
const childEnv = "LOCKD_FAULTFS_CHILD"

// The calls a Remote makes to its child, named after FS's methods.
const (
	opMount        = "Mount"
	opFailWrites   = "FailWrites"
	opFailed       = "Failed"
	opFailReads    = "FailReads"
	opCorruptReads = "CorruptReads"
	opBadReads     = "BadReads"
	opUnsynced     = "Unsynced"
	opPowerLoss    = "PowerLoss"
	opUnmount      = "Unmount"
)

// request is one call from a Remote to its child: a JSON object a line
// on the child's stdin.
type request struct {
	Op         string        `json:"op"`
	On         bool          `json:"on,omitempty"`
	Seed       int64         `json:"seed,omitempty"`       // PowerLoss: the tear's seed; 0 tears nothing
	Backing    string        `json:"backing,omitempty"`    // Mount
	Mountpoint string        `json:"mountpoint,omitempty"` // Mount
	Within     time.Duration `json:"within,omitempty"`     // Mount: cut the mount then; 0: never
}

// reply answers a request, on the child's stdout.
type reply struct {
	N     int64         `json:"n,omitempty"`    // Failed, BadReads, Unsynced; Unmount: Unsynced after it
	Loss  Loss          `json:"loss"`           // PowerLoss
	Conn  uint32        `json:"conn,omitempty"` // Mount: the FUSE connection
	Err   string        `json:"err,omitempty"`
	Errno syscall.Errno `json:"errno,omitempty"` // the errno Err wraps, if any
}

// errReply carries err (nil: none) and the errno it wraps, so that the
// parent can tell EPERM from other failures.
func errReply(err error) reply {
	if err == nil {
		return reply{}
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	return reply{Err: err.Error(), Errno: errno}
}

// err is the error the reply carries, nil if none.
func (r reply) err() error {
	if r.Err == "" {
		return nil
	}
	return &childError{msg: r.Err, errno: r.Errno}
}

// childError is an error the child answered: its message, and the errno
// it wrapped there (0 if none) for errors.Is.
type childError struct {
	msg   string
	errno syscall.Errno
}

func (e *childError) Error() string { return e.msg }

func (e *childError) Unwrap() error {
	if e.errno == 0 {
		return nil
	}
	return e.errno
}

// ServeChild serves a mirror, and exits, when this process is a child
// StartChild started; otherwise it returns at once. A program that calls
// StartChild calls it first thing in main, or in TestMain (which
// faultfstest.Main does): the child is the same program run again.
//
// The child mounts the mirror its parent asks for and answers its calls
// until Unmount, or until its stdin closes (the parent is gone): then it
// unmounts and exits, so that no mount outlives the process using it. It
// never touches a file on the mount it serves.
func ServeChild() {
	if os.Getenv(childEnv) == "" {
		return
	}
	// A Ctrl-C reaches the whole process group: the child ends when its
	// parent has, and then unmounts first.
	signal.Ignore(os.Interrupt)
	out := os.Stdout
	os.Stdout = os.Stderr // stdout carries the replies: nothing else may print there
	os.Exit(serveChild(os.Stdin, out))
}

// serveChild mounts the mirror the first request asks for and answers
// the requests on in until Unmount or its end; it returns the exit code.
func serveChild(in io.Reader, out io.Writer) int {
	dec, enc := json.NewDecoder(in), json.NewEncoder(out)
	var req request
	if err := dec.Decode(&req); err != nil || req.Op != opMount {
		fmt.Fprintf(os.Stderr, "faultfs child: want a %s call first, got %q: %v\n", opMount, req.Op, err)
		return 2
	}
	f, err := Mount(req.Backing, req.Mountpoint)
	if err != nil {
		_ = enc.Encode(errReply(err))
		return 1
	}
	if within := req.Within; within > 0 {
		time.AfterFunc(within, func() { os.Exit(f.outlived(within)) })
	}
	rep := reply{Conn: f.conn}
	for {
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(os.Stderr, "faultfs child: answer: %v\n", err)
			break
		}
		if req.Op == opUnmount {
			return 0
		}
		req = request{}
		if err := dec.Decode(&req); err != nil { // io.EOF: the parent is gone
			break
		}
		rep = f.answer(req)
	}
	if err := f.Unmount(); err != nil {
		fmt.Fprintf(os.Stderr, "faultfs child: %v\n", err)
		return 1
	}
	return 0
}

// outlived cuts a mount still served after within, the limit its parent
// set: a backstop for a parent that cannot cut it itself (a collection
// that stops its world waits for a thread held by a page fault on the
// mount, and its watchdog waits with it). It returns the exit code.
func (f *FS) outlived(within time.Duration) int {
	fmt.Fprintf(os.Stderr, "faultfs child: the mirror at %s was still mounted %v on: cut it\n", f.mountpoint, within)
	if err := f.cut(); err != nil {
		fmt.Fprintf(os.Stderr, "faultfs child: %v\n", err)
	}
	return 3
}

// answer makes the call req asks for.
func (f *FS) answer(req request) reply {
	switch req.Op {
	case opFailWrites:
		f.FailWrites(req.On)
	case opFailed:
		return reply{N: f.Failed()}
	case opFailReads:
		f.FailReads(req.On)
	case opCorruptReads:
		f.CorruptReads(req.On)
	case opBadReads:
		return reply{N: f.BadReads()}
	case opUnsynced:
		return reply{N: int64(f.Unsynced())}
	case opPowerLoss:
		var tear *rand.Rand
		if req.Seed != 0 {
			tear = rand.New(rand.NewSource(req.Seed))
		}
		loss, err := f.PowerLoss(tear)
		rep := errReply(err)
		rep.Loss = loss
		return rep
	case opUnmount:
		rep := errReply(f.Unmount())
		rep.N = int64(f.Unsynced())
		return rep
	default:
		return reply{Err: fmt.Sprintf("faultfs child: no call %q", req.Op)}
	}
	return reply{}
}
