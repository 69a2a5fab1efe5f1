package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockd/lockd/api/client"
)

// waitFlag is --wait: unset means wait as long as it takes (like flock(1)
// and consul lock), 0 means try once.
type waitFlag struct {
	d   time.Duration
	set bool
}

func (w *waitFlag) String() string {
	if w == nil || !w.set {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("negative wait")
	}
	w.d, w.set = d, true
	return nil
}

// lockOpts are the flags of lockctl lock and lockctl elect.
type lockOpts struct {
	elect   bool   // elect: an exclusive hold with a value, as a candidate
	value   string // elect's --value
	read    bool
	wait    waitFlag
	limit   int
	ttl     time.Duration
	grace   time.Duration
	verbose bool
	name    string
	argv    []string
}

const lockHelp = `
Runs COMMAND while holding NAME, with LOCKD_LOCK, LOCKD_FENCING_TOKEN
and LOCKD_SESSION in its environment; releases NAME when it ends. Flags go
before NAME, or between NAME and "--". SIGINT, SIGTERM and SIGHUP are forwarded to the command's process
group. One word with spaces is run by /bin/sh -c ("make && deploy").
Without COMMAND, prints NAME and its fencing token once held and holds
it until interrupted (exit 0), as etcdctl lock does. If the session is lost or an operator revokes the lock, the command
gets SIGTERM, then SIGKILL after --grace, and lockctl exits 74.

Exit codes of lock:
  the command's own   it ran (128+N: killed by signal N)
  64                  usage error
  65                  refused by the server (e.g. --limit differs from the semaphore's)
  69                  cluster unavailable (unreachable, no leader)
  70                  internal error
  73                  not acquired within --wait; the holders are named
  74                  session lost, or the lock revoked; the command was stopped
  75                  a configured limit refused the session or the lock
  77                  no valid token (unauthorized), or the token does not allow NAME (forbidden)
  126, 127            the command could not be run / was not found
`

const electHelp = `
Campaigns for NAME with --value (what the leader says about itself, such
as where to reach it: lockctl leader NAME prints it) and runs COMMAND only
while elected: it queues as a candidate, and once elected runs COMMAND
with LOCKD_LOCK, LOCKD_FENCING_TOKEN (the term), LOCKD_SESSION and
LOCKD_VALUE in its environment; resigns when it ends. Flags go before
NAME, or between NAME and "--". SIGINT, SIGTERM and SIGHUP are forwarded
to the command's process group. If the leadership is lost (an operator
revokes it, the session is deleted or expires), the command gets SIGTERM,
then SIGKILL after --grace, and lockctl exits 74.

Without COMMAND, prints NAME and the term's fencing token once elected and
leads until interrupted, as etcdctl elect does.

Exit codes of elect are those of lock; 73: not elected within --wait.
`

func runLock(e *env, args []string) int { return runHold(e, args, false) }

func runElect(e *env, args []string) int { return runHold(e, args, true) }

// runHold is lock, and elect: lock with a value, exclusive, that says
// "elected" where lock says "acquired".
func runHold(e *env, args []string, elect bool) int {
	o := lockOpts{elect: elect}
	fs := e.flags(false)
	help := lockHelp
	if elect {
		help = electHelp
		fs.StringVar(&o.value, "value", "", "what the leader says about itself, typically where to reach it (UTF-8, at most 4096 bytes)")
		fs.Var(&o.wait, "wait", "longest `duration` to wait as a candidate: 0 leads only if nobody does; unset: as long as it takes")
	} else {
		fs.BoolVar(&o.read, "read", false, "take a shared (read) lock instead of an exclusive one")
		fs.Var(&o.wait, "wait", "longest `duration` to wait for the lock: 0 tries once; unset: as long as it takes")
		fs.IntVar(&o.limit, "limit", 0, "make NAME a semaphore of `N` permits and take one (at most N jobs at once)")
	}
	fs.DurationVar(&o.ttl, "ttl", 10*time.Second, "session TTL: how long the hold outlives a lockctl that stops keeping it alive")
	fs.DurationVar(&o.grace, "grace", 5*time.Second, "after SIGTERM on a lost hold, how long before SIGKILL")
	fs.BoolVar(&o.verbose, "verbose", false, "while waiting, print progress to stderr every few seconds (always when stderr is a terminal)")
	e.note(fs, help)
	// Flags before NAME here; those between NAME and "--" are parsed by
	// commandAfterName (what follows NAME may be the command itself).
	if code, ok := e.parseHead(fs, args); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return e.usageErr(fs, "missing NAME")
	}
	o.name = rest[0]
	var err error
	if o.argv, err = commandAfterName(fs, rest[1:]); err != nil {
		return e.usageErr(fs, "%s", err)
	}
	o.argv = shellCommand(o.argv)
	switch {
	case o.limit < 0:
		return e.usageErr(fs, "--limit must be positive")
	case o.read && o.limit > 0:
		return e.usageErr(fs, "--read and --limit exclude each other (a semaphore's permits are exclusive)")
	case o.ttl < time.Second:
		return e.usageErr(fs, "--ttl must be at least 1s")
	case o.grace < 0:
		return e.usageErr(fs, "--grace must not be negative")
	}
	return e.lock(&o)
}

// commandAfterName splits what follows NAME into the command to run. Flags
// may also stand between NAME and "--" (they are parsed into fs); without
// "--", a first word that looks like a flag is refused rather than run as
// the command — after the lock was taken.
func commandAfterName(fs *flag.FlagSet, rest []string) ([]string, error) {
	end := slices.Index(rest, "--")
	if end < 0 {
		if len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			return nil, fmt.Errorf("%q after NAME: put flags before NAME, or before \"--\" (lockctl %s [flags] NAME [flags] -- COMMAND)", rest[0], fs.Name())
		}
		return rest, nil
	}
	if err := fs.Parse(rest[:end]); err != nil {
		return nil, err
	}
	if extra := fs.Args(); len(extra) > 0 {
		return nil, fmt.Errorf("unexpected %q between NAME and \"--\"", extra)
	}
	return rest[end+1:], nil
}

// shellCommand runs a command given as one word with spaces through the
// shell, as consul lock does: `lockctl lock x -- "make && deploy"` means
// what it says, not an executable named "make && deploy".
func shellCommand(argv []string) []string {
	if len(argv) == 1 && strings.ContainsAny(argv[0], " \t\n") {
		return []string{"/bin/sh", "-c", argv[0]}
	}
	return argv
}

// lock acquires, runs the command (or, without one, holds until a
// signal) and releases.
func (e *env) lock(o *lockOpts) int {
	// Resolve the command first: no point holding a lock for a typo.
	var path string
	if len(o.argv) > 0 {
		var err error
		if path, err = exec.LookPath(o.argv[0]); err != nil {
			fmt.Fprintf(e.stderr, "lockctl %s: %v\n", e.cmd.name, err)
			if errors.Is(err, exec.ErrNotFound) {
				return exitNotFound
			}
			return exitCannotExec
		}
	}

	// Catch signals from the start: before the command runs they abandon
	// the wait, afterwards they are forwarded to it.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)

	c, err := e.client()
	if err != nil {
		fmt.Fprintf(e.stderr, "lockctl %s: %v\n", e.cmd.name, err)
		return exitUsage
	}
	s, grant, code := e.acquire(c, o, sigc)
	if s == nil {
		return code
	}
	defer func() {
		// Deleting the session releases the lock. If that fails the lock
		// is released anyway when the TTL runs out. Closing a lost session
		// sends nothing: the cluster expires it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			fmt.Fprintf(e.stderr, "lockctl %s: releasing %s: %v (it is released when the session TTL of %v runs out)\n", e.cmd.name, o.name, err, o.ttl)
		}
	}()
	if grant == nil {
		return code
	}
	if len(o.argv) == 0 {
		return e.holdUntilSignal(o, grant, sigc)
	}
	return e.runUnderLock(o, path, s, grant, sigc)
}

// holdUntilSignal is lock without a command, as etcdctl lock and elect
// are: it prints the name and fencing token and holds until SIGINT,
// SIGTERM or SIGHUP (exit 0, the hold released), or until the hold is
// lost (exit 74).
func (e *env) holdUntilSignal(o *lockOpts, g *client.Grant, sigc <-chan os.Signal) int {
	fmt.Fprintf(e.stdout, "%s %d\n", o.name, g.TokenFor(o.name))
	fmt.Fprintf(e.stderr, "lockctl %s: %s %s (fencing token %d); holding it until interrupted\n",
		e.cmd.name, o.name, o.had(), g.TokenFor(o.name))
	select {
	case <-sigc:
		return exitOK
	case <-g.Lost():
		fmt.Fprintf(e.stderr, "lockctl %s: %s lost (%v): %s\n", e.cmd.name, o.name, g.LostErr(), o.someoneElse())
		return exitSessionLost
	}
}

// acquire creates the session and takes the lock. It returns the session
// (nil if none is left to close) and the grant, or the exit code.
func (e *env) acquire(c *client.Client, o *lockOpts, sigc <-chan os.Signal) (*client.Session, *client.Grant, int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchWait(ctx, cancel, o.name, sigc)
	sctx, scancel := context.WithTimeout(ctx, e.timeout)
	s, err := c.NewSession(sctx, o.ttl, client.WithSessionName(sessionName(o.argv)))
	scancel()
	if err != nil {
		if sig := w.signal.Load(); sig != 0 {
			return nil, nil, exitSignalBase + int(sig)
		}
		return nil, nil, e.fail(err)
	}
	w.sessions <- s
	if o.verbose || isTerminal(e.stderr) {
		go e.progress(ctx, c, s, o.name)
	}
	g, waited, err := takeLock(ctx, s, o, e.timeout)
	cancel() // stop the signal watcher before asking it what it saw
	if sig := w.signal.Load(); sig != 0 {
		// Also when granted just now: the user asked us to stop.
		return s, nil, exitSignalBase + int(sig)
	}
	if err == nil {
		return s, g, 0
	}
	if serr := s.Err(); serr != nil {
		return s, nil, e.fail(serr)
	}
	code := exitCode(err)
	if waited {
		code = exitNotAcquired
	}
	if code != exitNotAcquired {
		return s, nil, e.fail(err)
	}
	fmt.Fprintf(e.stderr, "lockctl %s: %s not %s within %v: %s\n", e.cmd.name, o.name, o.had(), o.wait.String(), e.holders(c, o.name))
	return s, nil, code
}

// waitWatch ends an acquire's wait early (cancelling its context) on a
// signal, or when the session, once it exists, is lost: a lost
// session's requests are gone.
type waitWatch struct {
	signal   atomic.Int32         // the signal that ended the wait; 0: none
	sessions chan *client.Session // the session, once created
}

// watchWait watches until ctx ends.
func (e *env) watchWait(ctx context.Context, cancel context.CancelFunc, name string, sigc <-chan os.Signal) *waitWatch {
	w := &waitWatch{sessions: make(chan *client.Session, 1)}
	go func() {
		var sessionDone <-chan struct{} // set once the session exists
		for {
			select {
			case s := <-w.sessions:
				sessionDone = s.Done()
				continue
			case <-sessionDone:
				cancel()
			case sig := <-sigc:
				fmt.Fprintf(e.stderr, "lockctl %s: %v while waiting for %s; giving up\n", e.cmd.name, sig, name)
				w.signal.Store(int32(sig.(syscall.Signal)))
				cancel()
			case <-ctx.Done():
			}
			return
		}
	}()
	return w
}

// sessionName says which lockctl holds the lock, for lockctl info and
// for a waiting lockctl's message.
func sessionName(argv []string) string {
	if len(argv) == 0 {
		argv = []string{"(holding until interrupted)"}
	}
	host, _ := os.Hostname()
	name := fmt.Sprintf("lockctl %s pid %d: %s", host, os.Getpid(), strings.Join(argv, " "))
	if len(name) > 200 {
		name = name[:200]
	}
	return name
}

// takeLock asks for the lock in s: once for --wait 0, else waiting up to
// --wait (unset: until ctx ends). waited reports that the --wait
// deadline passed.
func takeLock(ctx context.Context, s *client.Session, o *lockOpts, timeout time.Duration) (g *client.Grant, waited bool, err error) {
	spec := client.LockSpec{Name: o.name, Mode: client.Write, Value: o.value}
	if o.read {
		spec.Mode = client.Read
	}
	if o.limit > 0 {
		spec.Weight, spec.Limit = 1, o.limit
	}
	specs := []client.LockSpec{spec}
	if o.wait.set && o.wait.d == 0 {
		tctx, tcancel := context.WithTimeout(ctx, timeout)
		defer tcancel()
		g, err = s.Acquire(tctx, specs, client.Wait(0))
		return g, false, err
	}
	actx := ctx
	if o.wait.set {
		var acancel context.CancelFunc
		actx, acancel = context.WithTimeout(ctx, o.wait.d)
		defer acancel()
	}
	g, err = s.Acquire(actx, specs)
	return g, errors.Is(actx.Err(), context.DeadlineExceeded), err
}

// holders describes who holds name, for a failed acquire.
func (e *env) holders(c *client.Client, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.GetLock(ctx, name)
	if err != nil {
		return fmt.Sprintf("holders unknown (%v)", err)
	}
	if len(info.Holders) == 0 {
		return "no holder now (try again)"
	}
	var parts []string
	for _, h := range info.Holders {
		p := fmt.Sprintf("%s (%s", sessionText(h.Session), holdText(h))
		if h.Session != "" {
			if si, err := c.GetSession(ctx, h.Session); err == nil && si.Name != "" {
				p += ", " + strconv.Quote(si.Name)
			}
		}
		parts = append(parts, p+")")
	}
	s := "held by " + strings.Join(parts, ", ")
	if info.Limit > 1 {
		s += fmt.Sprintf(" (semaphore of %d)", info.Limit)
	}
	if n := len(info.Waiters); n > 0 {
		s += fmt.Sprintf("; %d waiting", n)
	}
	return s
}

// runUnderLock runs the command while s lives and returns lockctl's exit code.
func (e *env) runUnderLock(o *lockOpts, path string, s *client.Session, g *client.Grant, sigc <-chan os.Signal) int {
	cmd := exec.Command(path, o.argv[1:]...)
	cmd.Args[0] = o.argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	cmd.Env = append(os.Environ(),
		"LOCKD_LOCK="+o.name,
		"LOCKD_FENCING_TOKEN="+strconv.FormatUint(g.TokenFor(o.name), 10),
		"LOCKD_SESSION="+s.ID(),
	)
	if o.elect {
		cmd.Env = append(cmd.Env, "LOCKD_VALUE="+o.value)
	}
	setProcAttr(cmd)
	// Pdeathsig fires when the thread that forked the child exits: keep
	// this goroutine on its thread while the child runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "lockctl %s: %v\n", e.cmd.name, err)
		return exitCannotExec
	}
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()

	// signalJob signals the command's whole process group.
	signalJob := func(sig syscall.Signal) { _ = syscall.Kill(-cmd.Process.Pid, sig) }
	// The grant is lost when the session is (and when an operator revokes
	// the lock): either way the lock may be someone else's now.
	var lost <-chan struct{} = g.Lost()
	var kill <-chan time.Time
	sessionLost := false
	for {
		select {
		case sig := <-sigc:
			signalJob(sig.(syscall.Signal))
		case <-lost:
			lost = nil
			sessionLost = true
			what := fmt.Sprintf("%s was revoked (%v)", o.name, g.LostErr())
			if s.Err() != nil {
				what = fmt.Sprintf("session %s lost (%v)", s.ID(), s.Err())
			}
			fmt.Fprintf(e.stderr, "lockctl %s: %s: %s; stopping the command (SIGTERM, SIGKILL after %v)\n",
				e.cmd.name, what, o.someoneElse(), o.grace)
			signalJob(syscall.SIGTERM)
			t := time.NewTimer(o.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			fmt.Fprintf(e.stderr, "lockctl %s: command still running %v after SIGTERM; sending SIGKILL\n", e.cmd.name, o.grace)
			signalJob(syscall.SIGKILL)
		case err := <-waitc:
			if sessionLost {
				// Whatever the command's status, its lock was gone.
				return exitSessionLost
			}
			return commandExitCode(err, cmd)
		}
	}
}

// had says what lockctl did not get in time: the lock, or the election.
func (o *lockOpts) had() string {
	if o.elect {
		return "elected"
	}
	return "acquired"
}

// someoneElse says what a lost hold means for o.name.
func (o *lockOpts) someoneElse() string {
	if o.elect {
		return "another candidate may lead " + o.name + " now"
	}
	return o.name + " may be held by someone else now"
}

// commandExitCode is the exit status of a finished command the way a shell
// reports it: its code, or 128+N when signal N killed it.
func commandExitCode(err error, cmd *exec.Cmd) int {
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	if err != nil && cmd.ProcessState == nil {
		return exitInternal
	}
	return cmd.ProcessState.ExitCode()
}
