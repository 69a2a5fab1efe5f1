/*
Lockctl is the command-line client of lockd. It runs cron and CI jobs under
a lock, in the manner of flock(1) and `consul lock`, runs a replica only
while it is the elected leader, and shows the state of a cluster.

Usage:

	lockctl COMMAND [FLAGS] [ARGS...]
	lockctl --help            the commands, with their flags and arguments, and the exit codes
	lockctl COMMAND --help    one command's flags

The commands are listed once, in the table of commands.go, from which
--help and the dispatch are made; the sections below explain the main ones,
and docs/cli.md shows every one with examples.

Every command takes --addr (comma-separated host:port or http(s)://host:port
addresses; default $LOCKD_ADDR, else 127.0.0.1:7001), --token (default
$LOCKD_TOKEN), --timeout (default 10s: give up on the cluster after it,
retries included; watch: stop watching after it) and the TLS flags below.
These flags may also come before the command (lockctl --token S locks).
A command's flags may also follow its arguments (lockctl get NAME --json);
lock and elect take them before NAME or between NAME and "--". A "--" before the
arguments makes every word after it an argument, even one that starts
with "-": a lock name may (lockctl get -- -odd/name), and so may the key
of a session that an older leader drew. The token's secret
is never printed, not even as a flag's default in usage texts.

# ACL tokens

Against a cluster run with --acl, every command but status needs a token:

	--token SECRET      sent as Authorization: Bearer SECRET
	                    (default $LOCKD_TOKEN; never printed)

acl bootstrap makes the cluster's first management token (once per
cluster) and prints its secret; acl token create makes a token with rules
(--rule jobs/=write: read, write or admin on the names starting with
jobs/) and prints its secret. Secrets are printed only there: acl tokens
lists ids, names and rules. acl token delete ID stops a token at once.
Without a valid token lockctl exits 77 (unauthorized); with a token that
does not allow the request, also 77 (forbidden); the message says which.

# Certificate deny list

cert deny SERIAL puts a certificate's serial (hex, as openssl prints it)
on the cluster's deny list: every node refuses that certificate on every
port. cert denied lists the serials. Both need a management token or an
operator's client certificate (--client-cert).

# lockctl member

member remove ID takes a node that is gone for good out of the raft
configuration (DELETE /v1/members/ID, through any node). The cluster
refuses, exit 65, while its gossip sees the node alive (409 member_alive):
it would add it back within seconds. A healthy node leaves instead; a node
stopped just now is seen dead within about 10s, and --wait D asks again
until then, for up to D. The leader cannot be removed (exit 65): make it
leave, or stop it and remove it once another node leads.

member leave ID asks node ID to leave for good (POST /v1/agent/leave on
it): lockctl finds its HTTP address among the members, checks that the
node there is ID, and returns once it has accepted; the node takes itself
out of the raft configuration and stops. An ID the cluster does not list
exits 1. Both need a management token or an operator's client certificate.

# lockctl revoke

revoke NAME (a token with admin on NAME) releases every hold on NAME at
once, whoever holds it, and prints each hold it revoked (session and
fencing token; "nobody held NAME" when there was none). The fencing tokens
stop being valid and waiters are granted in their order. A lockctl lock
holding NAME learns it on its next keepalive (within a third of its --ttl),
stops its command like on a lost session and exits 74.

# TLS

lockctl speaks plain HTTP unless it is given a CA or a client certificate;
then it speaks HTTPS to every node, including the leader it learns from the
cluster:

	--ca-cert FILE      the CA certificate(s) the nodes' certificates chain
	                    to (default $LOCKD_CACERT; without it, the system roots)
	--client-cert FILE  a client certificate, for nodes run with
	--client-key FILE   --tls-client-auth (default $LOCKD_CLIENT_CERT and
	                    $LOCKD_CLIENT_KEY); `lockd tls cert --client` makes one

A handshake that fails (a certificate that does not verify, a node that
refuses lockctl's, a node that speaks plain HTTP) is reported at once, with
exit code 69.

# lockctl lock

lock creates a session, acquires NAME (exclusively; shared with --read; as
one permit of a semaphore of --limit N permits), then runs COMMAND with these
variables added to its environment:

	LOCKD_LOCK           the lock name
	LOCKD_FENCING_TOKEN  the fencing token of the grant
	LOCKD_SESSION        the session id

(LOCKD_TOKEN is the ACL token lockctl itself sends; the command inherits it
from lockctl's environment, if it is there.)

The session is kept alive while the command runs and deleted when it ends,
which releases the lock; lockctl then exits with the command's exit code.

A command given as one word with spaces (lockctl lock x -- "make && deploy")
is run by /bin/sh -c, as consul lock does. Without a command, lock prints
NAME and its fencing token once it holds it, and holds it until interrupted
(SIGINT, SIGTERM or SIGHUP: exit 0) or lost (exit 74), as etcdctl lock
does; so does elect.

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
or no keepalive has succeeded for the TTL minus a safety margin — or an
operator revokes the lock (lockctl revoke), the lock may already belong to
someone else: lockctl says which happened, sends the command SIGTERM, then
SIGKILL after --grace, and exits 74. A single failed keepalive, or a leader
election the session survives, does not count as lost.

# lockctl elect and leader

elect is lock with a value, for leader election: it campaigns for NAME
with --value (what the leader says about itself, typically where to reach
it), waits as a candidate and runs COMMAND only while elected, with lock's
variables and LOCKD_VALUE; LOCKD_FENCING_TOKEN is the term. A leadership
revoked or a session lost stops the command as lock does (exit 74); when
the command ends, lockctl resigns and the next candidate is elected.

leader NAME prints the leader's value, token and since when it leads
(exit 1: nobody leads); --watch prints it, then each new leader or
proclaimed value in token order until interrupted (Election.Observe of
the Go client).

# lockctl watch

watch prints NAME's state, then one line per change of its holders, waiters
or version (--json: one JSON object per line), following the version with
blocking queries (GET /v1/locks/NAME?index=V&wait=30s). It stops, exiting 0,
on SIGINT or SIGTERM or after --timeout.

# lockctl session and release

session create makes a session and prints its id. lockctl sends it no
keepalives, so it expires after its --ttl (default 10s) unless something
else keeps it alive. session list, show and delete inspect and end sessions;
release --session ID NAME releases one hold of NAME by session ID.

See docs/cli.md for every command and flag, with examples.

# Exit codes

	0        success (lock, elect: the command exited 0)
	1        a negative answer: check: the token is not valid; get: nobody
	         holds or waits for NAME; leader: nobody leads NAME; session
	         show/delete, release: no such session; release: the session
	         does not hold NAME; member leave: no such member
	1-125    lock, elect: the command's own exit code
	64       usage error (bad flags or arguments)
	65       the server refused the request: as invalid (e.g. a --limit that
	         differs from the semaphore's), or member remove of a node the
	         cluster sees alive (409 member_alive)
	69       unavailable: no node reachable, or no leader (status and members
	         also exit 69 when the node answering sees no leader, status
	         when its quorum is lost: "Quorum: lost (1 of 3 voters
	         reachable: n1; a majority of 2 is needed)")
	70       internal error (of lockctl or the server)
	73       lock: not acquired within --wait (someone holds it); elect: not
	         elected within --wait
	74       lock, elect: session lost, or the lock revoked, while the
	         command ran (the command was stopped)
	75       a configured limit of the cluster refused the request (sessions,
	         holds, waiters, waits: 429 limit_exceeded)
	77       no valid token (401 unauthorized: none, unknown or deleted), or
	         the token does not allow the request (403 forbidden)
	78       configuration error: the node speaks HTTPS and lockctl was
	         given no --ca-cert (LOCKD_CACERT)
	126      lock, elect: the command could not be started
	127      lock, elect: the command was not found
	128+N    lock, elect: the command was killed by signal N, or lockctl was
	         interrupted by signal N before the command started
*/
package main
