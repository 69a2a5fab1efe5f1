"""lockd: the Python client of lockd, a Raft-replicated lock service.

Standard library only. A :class:`Client` knows a few nodes, learns the
leader and fails over; a :class:`Session` owns locks and is kept alive by a
daemon thread; :meth:`Session.lock` returns a :class:`Grant` with the
fencing ``token`` and a ``lost`` event::

    import lockd

    client = lockd.Client(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"])
    with client.session(ttl=10, name="nightly-backup") as s:
        with s.lock("jobs/backup", wait=30) as grant:
            run_backup(fencing_token=grant.token, stop=grant.lost)

Leader election: ``s.campaign(name, value)`` returns a :class:`Leadership`
once elected (``with`` resigns); ``client.leader(name)`` and
``client.observe(name)`` tell everyone else who leads::

    with client.session(ttl=10) as s, s.campaign("svc/scheduler", "10.0.0.7:8080") as lead:
        serve(fencing_token=lead.token, stop=lead.lost)

``lockd.aio`` offers the same over asyncio.
"""

from ._transport import Retry, RetryPolicy
from .client import Client, tls_context
from .errors import (Cancelled, ClusterUnavailable, Deadlock, Diverged, Forbidden, InternalError,
                     InvalidRequest, KeepaliveError, LimitExceeded, LimitMismatch, Locked, LockdError,
                     LockNotFound, MemberAlive, NotFound, NotHeld, OutcomeUnknown, PoorlyOrderedAccess,
                     RequestNotFound, Revoked, SessionClosed, SessionLost, SessionNotFound, Timeout,
                     TLSError, TokenNotFound, Unauthorized)
from .session import Grant, Leadership, Session, State
from .types import (GrantedLock, HeldLock, Holder, Leader, LockInfo, LockSpec, Member, Mode, Require, Revocation,
                    RevokedHold, Rule, SessionInfo, Status, Token, Waiter)

__version__ = "0.1.0"

__all__ = [
    "Client", "Session", "Grant", "Leadership", "Leader", "State", "Retry", "RetryPolicy", "tls_context",
    "LockSpec", "GrantedLock", "LockInfo", "Holder", "Waiter", "Status", "Member", "SessionInfo",
    "HeldLock", "Revocation", "RevokedHold", "Rule", "Token", "Mode", "Require",
    "LockdError", "InvalidRequest", "Unauthorized", "Forbidden", "NotFound", "SessionNotFound",
    "RequestNotFound", "LockNotFound", "TokenNotFound", "Timeout", "Locked", "Deadlock",
    "PoorlyOrderedAccess", "NotHeld", "LimitMismatch", "Cancelled", "MemberAlive", "LimitExceeded",
    "ClusterUnavailable", "Diverged", "OutcomeUnknown", "TLSError", "Revoked", "SessionLost", "SessionClosed",
    "KeepaliveError", "InternalError",
]
