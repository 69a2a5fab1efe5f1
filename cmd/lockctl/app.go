package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/cmd/internal/clientflags"
)

// Exit codes; the table is in the package documentation and in usage.
const (
	exitOK          = 0
	exitFalse       = 1  // a negative answer: check invalid, get/session/release not found
	exitUsage       = 64 // EX_USAGE
	exitDataErr     = 65 // EX_DATAERR: the server refused the request (invalid, or a member alive)
	exitUnavailable = 69 // EX_UNAVAILABLE: unreachable or no leader
	exitInternal    = 70 // EX_SOFTWARE
	exitNotAcquired = 73 // lock not had within --wait
	exitSessionLost = 74 // session lost, or the lock revoked, while the command ran
	exitLimit       = 75 // EX_TEMPFAIL: a configured limit refused the request
	exitNoPerm      = 77 // EX_NOPERM: no valid token, or the token does not allow it
	exitConfig      = 78 // EX_CONFIG: lockctl's own configuration is wrong (a node speaks HTTPS, no --ca-cert)
	exitCannotExec  = 126
	exitNotFound    = 127
	exitSignalBase  = 128
)

const defaultAddr = "127.0.0.1:7001"

// defaultTimeout is --timeout's default: a node without a leader answers
// after about 6s (raft's election timeouts at --raft-timing 1), so one
// such answer, with the node's own reason, fits.
const defaultTimeout = 10 * time.Second

// retryPolicy fits the client's retries into --timeout: no new attempt
// after half of it, and an attempt long enough for a node to answer "no
// leader" after its own wait, so that lockctl reports the cluster's
// reason rather than its own deadline.
func (e *env) retryPolicy() client.RetryPolicy {
	p := client.DefaultRetryPolicy
	p.MaxElapsed = e.timeout / 2
	p.AttemptTimeout = max(e.timeout*7/10, time.Second)
	p.MaxBackoff = min(p.MaxBackoff, e.timeout/4)
	return p
}

// usageHead and usageTail are lockctl --help before and after the
// commands' usage lines (printUsage).
const usageHead = `lockctl — run jobs under lockd locks or as elected leaders, and inspect a lockd cluster

Usage:
`

const usageTail = `
Every command takes these flags, after the command or before it
(lockctl --addr A locks):
  --addr A[,A...]      lockd addresses (default $LOCKD_ADDR, else ` + defaultAddr + `)
  --ca-cert FILE       speak HTTPS, trusting the CA in FILE (default $LOCKD_CACERT;
                       the system roots when only a client certificate is given)
  --client-cert FILE   speak HTTPS, presenting this client certificate, for nodes
  --client-key FILE    run with --tls-client-auth (default $LOCKD_CLIENT_CERT and
                       $LOCKD_CLIENT_KEY)
  --token SECRET       ACL token sent as Authorization: Bearer (default $LOCKD_TOKEN;
                       the secret is never printed)
  --timeout D          give up on the cluster after D, retries included, with the
                       cluster's last answer as the reason (default 10s; lock,
                       elect: after --wait)
Run "lockctl COMMAND --help" for a command's flags. A "--" before the
arguments makes every word after it an argument, even one that starts with
"-" (lockctl get -- -odd/name).

Exit codes:
  0       success (lock, elect: the command exited 0)
  1       a negative answer: check: token not valid; get: nobody holds or
          waits for NAME; leader: nobody leads NAME; session show/delete,
          release: no such session; release: the session does not hold
          NAME; member leave: no such member
  1-125   lock, elect: the command's own exit code
  64      usage error
  65      the server refused the request: invalid (e.g. a --limit mismatch), or
          member remove of a node the cluster sees alive (409 member_alive)
  69      unavailable: no node reachable, or no leader (status: also when
          the answering node's quorum is lost)
  70      internal error
  73      lock: not acquired within --wait (the holders are named); elect:
          not elected within --wait (the leader is named)
  74      lock, elect: session lost, or the lock revoked, while the command
          ran (the command was stopped)
  75      a configured limit refused the request (sessions, holds, waiters, waits)
  77      no valid token (unauthorized), or the token does not allow it (forbidden)
  78      configuration error: e.g. the node speaks HTTPS and no --ca-cert was given
  126     lock, elect: the command could not be started
  127     lock, elect: the command was not found
  128+N   lock, elect: the command was killed by signal N (or lockctl was, before it started)
`

// usage is lockctl --help.
func usage() string {
	var b strings.Builder
	b.WriteString(usageHead)
	printUsage(&b, "")
	b.WriteString(usageTail)
	return b.String()
}

// env holds what every subcommand needs: which command it is, where to
// write and how to reach the cluster.
type env struct {
	cmd            *command
	stdout, stderr io.Writer
	addr           string
	// caCert, clientCert and clientKey name the TLS files; all "" for
	// plain HTTP.
	tls     clientflags.TLS
	token   clientflags.Token // ACL secret; never printed
	timeout time.Duration     // bounds each call to the cluster (lock: beyond --wait)
	json    bool
}

// globalFlags are the flags every command takes, which may also come
// before the command (lockctl --addr A locks), as etcdctl users type
// them; true: it takes a value.
var globalFlags = map[string]bool{"addr": true, "ca-cert": true, "client-cert": true, "client-key": true,
	"token": true, "timeout": true, "json": false}

// hoistGlobals moves the common flags before the command to just after
// it, where the command's own flag set reads them.
func hoistGlobals(args []string) ([]string, error) {
	var globals []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		takesValue, ok := globalFlags[name]
		switch {
		case name == "h" || name == "help":
			return args, nil
		case !ok:
			return nil, fmt.Errorf("unknown flag %s before the command (flags before it: --addr, --ca-cert, --client-cert, --client-key, --token, --timeout, --json)", args[0])
		case takesValue && !hasValue && len(args) < 2:
			return nil, fmt.Errorf("flag %s needs a value", args[0])
		case takesValue && !hasValue:
			globals, args = append(globals, args[0], args[1]), args[2:]
		default:
			globals, args = append(globals, args[0]), args[1:]
		}
	}
	switch {
	case len(globals) == 0:
		return args, nil
	case len(args) == 0:
		return nil, errors.New("flags but no command")
	}
	n := commandWords(args)
	return append(append(slices.Clone(args[:n]), globals...), args[n:]...), nil
}

// run is lockctl without the process around it, so that it can be tested.
func run(args []string, stdout, stderr io.Writer) int {
	args, err := hoistGlobals(args)
	if err != nil {
		fmt.Fprintf(stderr, "lockctl: %v\n\nRun \"lockctl --help\" for the commands.\n", err)
		return exitUsage
	}
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, usage())
		return exitUsage
	case isHelp(args[0]):
		fmt.Fprint(stdout, usage())
		return exitOK
	}
	c, words, group := lookup(args)
	switch {
	case c != nil:
		return c.run(&env{cmd: c, stdout: stdout, stderr: stderr}, args[words:])
	case group > 0:
		return runGroup(&env{stdout: stdout, stderr: stderr}, args[:group], args[group:])
	}
	fmt.Fprintf(stderr, "lockctl: unknown command %q (run \"lockctl --help\" for the commands)\n", args[0])
	return exitUsage
}

// flags returns a FlagSet for the command with the flags every command
// shares; withJSON adds --json.
func (e *env) flags(withJSON bool) *flag.FlagSet {
	name := e.cmd.name
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: lockctl %s\n\nFlags:\n", e.cmd.synopsis(0))
		fs.PrintDefaults()
		fmt.Fprint(e.stderr, "\nExit codes: see \"lockctl --help\".\n")
	}
	addr := os.Getenv(client.EnvAddr)
	if addr == "" {
		addr = defaultAddr
	}
	fs.StringVar(&e.addr, "addr", addr, "comma-separated lockd addresses (host:port or http(s)://host:port; env "+client.EnvAddr+")")
	e.tls.Register(fs)
	e.token.Register(fs)
	e.timeout = defaultTimeout
	if name != "watch" { // watch's own --timeout says how long to watch
		fs.DurationVar(&e.timeout, "timeout", defaultTimeout, "give up on the cluster after this long, retries included (lock, elect: after --wait), with the last reason")
	}
	if withJSON {
		fs.BoolVar(&e.json, "json", false, "print JSON instead of a table")
	}
	return fs
}

// note adds text to fs's --help, after the flags.
func (e *env) note(fs *flag.FlagSet, text string) {
	u := fs.Usage
	fs.Usage = func() {
		u()
		fmt.Fprint(e.stderr, text)
	}
}

// parse parses args into fs, flags before, between and after the
// arguments alike (get NAME --json is get --json NAME); after "--" every
// word is an argument. ok is false with the exit code to return (0 for
// --help).
func (e *env) parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	head, tail := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		head, tail = args[:i], args[i:]
	}
	var words []string
	for {
		if code, ok := e.parseHead(fs, head); !ok {
			return code, false
		}
		if fs.NArg() == 0 {
			break
		}
		words, head = append(words, fs.Arg(0)), fs.Args()[1:]
	}
	// Leave the arguments in fs, as fs.Args(): none of words is a flag.
	return e.parseHead(fs, append(words, tail...))
}

// parseHead parses the flags before the first argument of args into fs.
func (e *env) parseHead(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// usageErr reports a usage error of fs and returns exitUsage.
func (e *env) usageErr(fs *flag.FlagSet, format string, a ...any) int {
	fmt.Fprintf(e.stderr, "lockctl %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	fs.Usage()
	return exitUsage
}

// client returns a client of --addr, speaking HTTPS when --ca-cert or
// --client-cert and --client-key are given. Its errors name the flag at
// fault.
func (e *env) client() (*client.Client, error) {
	cfg, err := e.tls.Config()
	if err != nil {
		return nil, fmt.Errorf("--ca-cert, --client-cert, --client-key: %w", err)
	}
	var eps []string
	for _, a := range strings.Split(e.addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			eps = append(eps, a)
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("--addr: no address")
	}
	c, err := client.NewWith(eps, client.WithTLS(cfg), client.WithToken(e.token.Secret()), client.WithRetryPolicy(e.retryPolicy()))
	if err != nil {
		return nil, fmt.Errorf("--addr: %w", err)
	}
	return c, nil
}

// fail prints err as the failure of cmd and returns the exit code its cause
// calls for.
func (e *env) fail(err error) int {
	code := exitCode(err)
	fmt.Fprintf(e.stderr, "lockctl %s: %s: %s\n", e.cmd.name, cause(code), reason(err))
	return code
}

// reason says why err happened, once: the server's code and message for
// an answer of the cluster (without the client's layers of context, which
// repeat "lockd"), the error itself otherwise.
func reason(err error) string {
	var ae *client.Error
	switch {
	case errors.Is(err, client.ErrHTTPSRequired):
		return "the node speaks HTTPS and lockctl spoke plain HTTP: pass --ca-cert FILE (or set " +
			client.EnvCACert + ") with the cluster's CA certificate"
	case errors.As(err, &ae) && ae.HTTPStatus != 0:
		return ae.Code + ": " + ae.Message
	}
	return err.Error()
}

// exitCode maps an error of the client to an exit code.
func exitCode(err error) int {
	var nerr net.Error
	var uerr *url.Error
	switch {
	case errors.Is(err, client.ErrHTTPSRequired):
		return exitConfig
	case errors.Is(err, client.ErrNoLeader), errors.As(err, &uerr), errors.As(err, &nerr):
		return exitUnavailable
	case errors.Is(err, client.ErrTimeout):
		return exitNotAcquired
	case errors.Is(err, client.ErrSessionNotFound), errors.Is(err, client.ErrKeepaliveExpired):
		return exitSessionLost
	case errors.Is(err, client.ErrInvalidRequest), errors.Is(err, client.ErrLimitMismatch),
		errors.Is(err, client.ErrMemberAlive):
		return exitDataErr
	case errors.Is(err, client.ErrUnauthorized), errors.Is(err, client.ErrForbidden):
		return exitNoPerm
	case errors.Is(err, client.ErrLimitExceeded):
		return exitLimit
	}
	return exitInternal
}

// cause names the class of failure an exit code stands for.
func cause(code int) string {
	switch code {
	case exitUnavailable:
		return "cluster unavailable"
	case exitNotAcquired:
		return "not acquired"
	case exitSessionLost:
		return "session lost"
	case exitDataErr:
		return "request refused"
	case exitNoPerm:
		return "not allowed"
	case exitLimit:
		return "over a limit"
	case exitConfig:
		return "configuration"
	}
	return "error"
}
