/*
Lockctl is the command-line client of lockd. It runs cron and CI jobs under
a lock, in the manner of flock(1) and `consul lock`, and shows the state of a
cluster.

Usage:

	lockctl lock [flags] NAME -- COMMAND [ARGS...]
	lockctl status [--json]
	lockctl locks [--prefix P] [--json]
	lockctl get [--json] NAME
	lockctl check [--json] NAME TOKEN

Every command takes --addr (comma-separated host:port or http(s)://host:port
addresses; default $LOCKD_ADDR, else 127.0.0.1:7001).

# lockctl lock

lock creates a session, acquires NAME (exclusively; shared with --read; as
one permit of a semaphore of --limit N permits), then runs COMMAND with these
variables added to its environment:

	LOCKD_LOCK     the lock name
	LOCKD_TOKEN    the fencing token of the grant
	LOCKD_SESSION  the session id

The session is kept alive while the command runs and deleted when it ends,
which releases the lock; lockctl then exits with the command's exit code.

By default lock waits for the lock as long as it takes, like flock(1) and
`consul lock`; --wait 0 tries once, --wait 30s waits up to 30 seconds. If the
lock is not had in time, lockctl names the holders and exits 73.

The command runs in its own process group, and signals reach the whole group,
so a job's children stop with it. SIGINT, SIGTERM and SIGHUP sent to lockctl
are forwarded to the command. (A command in its own group cannot read from
the terminal; lockctl is meant for non-interactive jobs.) On Linux the
command is also killed if lockctl itself dies, since nobody would keep its
session alive.

If the session is lost while the command runs — the cluster said it is gone,
or no keepalive has succeeded for the TTL minus a safety margin — the lock
may already belong to someone else: lockctl sends the command SIGTERM, then
SIGKILL after --grace, and exits 74. A single failed keepalive, or a leader
election the session survives, does not count as lost.

# Exit codes

	0        success (lock: the command exited 0)
	1        check: the token is not valid; get: nobody holds or waits for NAME
	1-125    lock: the command's own exit code
	64       usage error (bad flags or arguments)
	65       the server refused the request as invalid (e.g. a --limit that
	         differs from the semaphore's)
	69       unavailable: no node reachable, or no leader
	70       internal error (of lockctl or the server)
	73       lock: not acquired within --wait (someone holds it)
	74       lock: session lost while the command ran (the command was stopped)
	126      lock: the command could not be started
	127      lock: the command was not found
	128+N    lock: the command was killed by signal N, or lockctl was
	         interrupted by signal N before the command started
*/
package main
