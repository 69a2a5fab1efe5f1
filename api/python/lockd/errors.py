"""The exceptions of the lockd client, mirroring the Go client's errors.

Every error the cluster answers is a :class:`LockdError` carrying the API's
``code``, the server's ``message`` and the HTTP status; the subclass says
which code it was. Catch the subclass you can handle::

    try:
        with session.lock("jobs/backup", wait=0):
            ...
    except lockd.Locked:            # the same class as lockd.Timeout
        print("someone else runs the backup")
"""

from __future__ import annotations

from typing import Any


class LockdError(Exception):
    """An error answer of the lockd API, or an error of this client.

    ``code`` is the API error code (``"timeout"``, ``"not_held"``, ...) or a
    code of this client (``"outcome_unknown"``, ``"session_lost"``, ...),
    ``message`` the server's (or client's) explanation, ``http_status`` the
    HTTP status (0 when the error was not an HTTP answer),
    ``not_applied`` the server's word that it did nothing with the request
    and ``quorum_lost``, on a 503 ``no_leader``, its word that it reaches
    fewer voters than a majority (no leader can be elected on its side:
    the message says how many it reaches).
    """

    #: The API code this class stands for (subclasses override it).
    default_code = "internal"
    #: Whether an answer of this code says only that the node could not
    #: serve the request, so that another node may (the API's list of codes
    #: says which: ``no_leader`` and ``diverged``): the client sends a call
    #: that is safe to repeat again, to another node.
    retry = False

    def __init__(self, message: str, *, code: str | None = None, http_status: int = 0,
                 not_applied: bool = False, quorum_lost: bool = False) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.message = message
        self.http_status = http_status
        self.not_applied = not_applied
        self.quorum_lost = quorum_lost
        #: The answer's headers, when it was an HTTP answer.
        self.headers: Any = None

    @property
    def retry_after(self) -> float:
        """The answer's ``Retry-After`` in seconds (0 without one): the node
        refused the request for load (a 429, or the 503 of a node with too
        many calls waiting for a leader). A retried call waits at least
        this long, plus jitter, before its next attempt."""
        try:
            return float(min(max(int(self.headers.get("Retry-After", "")), 0), 3600)) if self.headers else 0.0
        except (TypeError, ValueError):
            return 0.0

    def __str__(self) -> str:
        if self.http_status:
            return f"lockd: {self.code} (HTTP {self.http_status}): {self.message}"
        return f"lockd: {self.code}: {self.message}"


class InvalidRequest(LockdError):
    """The request was malformed: a bad name, mode, duration or body (400),
    or a body that is not JSON (415)."""

    default_code = "invalid_request"


class Unauthorized(LockdError):
    """No token, or a token that does not exist (401, with ACLs on)."""

    default_code = "unauthorized"


class Forbidden(LockdError):
    """The token does not allow the call (403)."""

    default_code = "forbidden"


class NotFound(LockdError):
    """Something named by the request does not exist (404)."""

    default_code = "not_found"


class SessionNotFound(NotFound):
    """The session does not exist (never did, closed or expired): treat
    every lock it held as lost."""

    default_code = "session_not_found"


class RequestNotFound(NotFound):
    """No such acquire request (never made, or forgotten)."""

    default_code = "request_not_found"


class LockNotFound(NotFound):
    """Nobody holds, waits for or delays the name."""

    default_code = "lock_not_found"


class TokenNotFound(NotFound):
    """No such ACL token."""

    default_code = "token_not_found"


class Timeout(LockdError):
    """Not granted within the wait; with ``wait=0``, not free right now.
    The message names the holders. Nothing is held."""

    default_code = "timeout"


#: What a try-lock (``wait=0``) raises when the lock is taken: the same
#: class as :class:`Timeout`, under a friendlier name.
Locked = Timeout


class Deadlock(LockdError):
    """This request was chosen as a deadlock victim."""

    default_code = "deadlock"


class PoorlyOrderedAccess(LockdError):
    """An ordered session asked for a name that does not sort after every
    name it holds or waits for."""

    default_code = "poorly_ordered_access"


class NotHeld(LockdError):
    """Release or surrender of something the session does not hold."""

    default_code = "not_held"


class LimitMismatch(LockdError):
    """The semaphore limit disagrees with the name's current one."""

    default_code = "limit_mismatch"


class Cancelled(LockdError):
    """The acquire was cancelled while it waited."""

    default_code = "cancelled"


class MemberAlive(LockdError):
    """The member to remove is alive as the leader's gossip sees it, so it
    would be added back: make it leave, or stop it first (409)."""

    default_code = "member_alive"


class LimitExceeded(LockdError):
    """A configured limit of the cluster refused the call (429)."""

    default_code = "limit_exceeded"


class ClusterUnavailable(LockdError):
    """No leader was reachable (503 ``no_leader``), or no node answered
    before the retries of a call that is safe to repeat ran out (or its
    deadline passed). When a node answered meanwhile, the error is that
    answer — ``http_status`` 503, the node's message (``no leader: 1 of 3
    voters reachable …``), ``quorum_lost`` — with the last failure added
    to the message; ``http_status`` is 0 when no node answered."""

    default_code = "no_leader"
    retry = True


class Diverged(ClusterUnavailable):
    """The node's table diverged from the leader's: it serves nothing from
    it until an operator replaces its data (503). The client asks another
    node; this is raised when none other answered."""

    default_code = "diverged"


class OutcomeUnknown(LockdError):
    """A call that is not safe to repeat (a release, a surrender, a revoke,
    a token created) was sent but no answer came back: it may or may not
    have been applied, and this client does not resend it blindly."""

    default_code = "outcome_unknown"


class TLSError(LockdError):
    """A TLS handshake failed for good: the node's certificate did not
    verify, the node refused this client's, or it does not speak TLS. Not
    retried: another attempt would fail the same way."""

    default_code = "tls"


class Revoked(LockdError):
    """A grant's ``lost_reason`` when an operator revoked one of its locks
    (``POST /v1/revoke``)."""

    default_code = "revoked"


class SessionLost(LockdError):
    """The session ended without being closed: the cluster said it is gone,
    refused its keepalives, or no keepalive succeeded within the TTL minus
    the safety margin. Every lock it held must be treated as lost."""

    default_code = "session_lost"


class SessionClosed(LockdError):
    """An operation on a session after :meth:`Session.close`."""

    default_code = "session_closed"


class KeepaliveError(SessionLost):
    """The keepalive thread failed with an unexpected exception (a bug, or
    something like MemoryError). The session is reported in state
    ``"error"`` instead of dying silently; ``__cause__`` is the exception."""

    default_code = "keepalive_error"


class InternalError(LockdError):
    """The server answered 500, or something other than a lockd answer."""

    default_code = "internal"


#: The class of each code of the API. tests/test_errors.py checks it
#: against the server's list of codes (Go's api/wire.ErrorCodes): every
#: code, its status (the 404s are NotFound, the 503s ClusterUnavailable)
#: and whether it is retried.
_BY_CODE: dict[str, type[LockdError]] = {
    c.default_code: c
    for c in (InvalidRequest, Unauthorized, Forbidden, NotFound, SessionNotFound, RequestNotFound,
              LockNotFound, TokenNotFound, Timeout, Deadlock, PoorlyOrderedAccess, NotHeld,
              LimitMismatch, Cancelled, MemberAlive, LimitExceeded, ClusterUnavailable, Diverged,
              InternalError)
}


def error_for(code: str, message: str, *, http_status: int = 0, not_applied: bool = False,
              quorum_lost: bool = False) -> LockdError:
    """Returns the exception for an API error code (:class:`LockdError`
    itself for a code this client does not know)."""
    cls = _BY_CODE.get(code, LockdError)
    return cls(message, code=code, http_status=http_status, not_applied=not_applied, quorum_lost=quorum_lost)
