"""Sessions, their keepalive thread, and the grants and leaderships they
hold."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Literal, Protocol

from ._keeper import Keeper
from ._transport import Retry, Transport, quote
from .errors import (Cancelled, ClusterUnavailable, Forbidden, KeepaliveError, LockdError, NotHeld,
                     OutcomeUnknown, RequestNotFound, Revoked, SessionClosed, SessionLost,
                     SessionNotFound, Timeout, Unauthorized, error_for)
from .types import GrantedLock, LockSpec, Mode, Require, Revocation, SessionInfo, format_duration



class Cluster(Protocol):
    """What a session needs of its client (lockd.Client is one): the
    transport its calls go through, the keeper its keepalives go through,
    and a session as the cluster sees it.
    Named here so that this module does not import client.py, which
    imports this one."""

    transport: Transport
    keeper: Keeper

    def get_session(self, session_id: str) -> SessionInfo: ...


log = logging.getLogger("lockd")

#: A session's state: ``"alive"`` (keepalives succeed), ``"suspended"``
#: (the last keepalive failed and is being retried on other nodes; the
#: locks are still held, but stop touching what they protect if it lasts),
#: ``"lost"`` (the cluster said the session is gone, refused its
#: keepalives, or none succeeded in time: every lock is gone), ``"error"``
#: (the keepalive thread failed unexpectedly: treat as lost) or
#: ``"closed"``.
State = Literal["alive", "suspended", "lost", "error", "closed"]

# The wait asked of the server when waiting without a bound; it caps it.
MAX_WAIT = 24 * 3600.0
# The least time left for which a request the server ended is renewed.
MIN_RETRY_WAIT = 0.1
# How long after its wait a re-attached request is given before it is
# cancelled (the server's own grace is 2s).
REATTACH_GRACE = 5.0
# How many revocations a session remembers (the cluster lists 16).
RECENT_REVOCATIONS = 64
#: How long leaving a session's ``with`` block (or a grant's, on an
#: exception) may spend giving it back by default, in seconds: long enough
#: for a leader election, short enough that an outage does not hold up the
#: program's exit.
DEFAULT_CLOSE_TIMEOUT = 2.0


def new_request_id() -> str:
    """A fresh idempotency key: 128 random bits."""
    return "py-" + secrets.token_hex(16)


class Grant:
    """A granted acquire: the locks the session now holds and their fencing
    tokens. A context manager: leaving the ``with`` block releases it, even
    on an exception.

    ``token`` is the fencing token (the largest among ``locks``): pass it to
    the protected resource, which checks it with :meth:`Client.check`.
    ``lost`` is a :class:`threading.Event` set when one of the locks is lost
    without this client releasing it (revoked by an operator, or the session
    ended); ``lost_reason`` then says why (:class:`Revoked`,
    :class:`SessionLost`, :class:`NotHeld`, ...). ``deadline``, for a grant
    with a hold TTL, is the ``time.monotonic()`` instant until which the
    holds surely last.
    """

    def __init__(self, session: Session, data: dict[str, Any], deadline: float | None = None) -> None:
        self.session = session
        self.request_id: str = data.get("request_id", "")
        self.token: int = data.get("token", 0)
        self.locks: list[GrantedLock] = [GrantedLock.of(g) for g in data.get("granted") or []]
        self.deadline = deadline
        self.lost = threading.Event()
        self.lost_reason: LockdError | None = None
        self.released = False
        self._once = threading.Lock()

    def __repr__(self) -> str:
        return f"<lockd.Grant {self.names()} token={self.token} lost={self.lost.is_set()}>"

    def names(self) -> list[str]:
        """The names of the granted locks."""
        return [lk.name for lk in self.locks]

    def token_for(self, name: str) -> int:
        """The fencing token of the named lock (0: not in this grant)."""
        return next((lk.token for lk in self.locks if lk.name == name), 0)

    def release(self) -> None:
        """Releases one hold of every lock of this grant."""
        self.session.release(self)

    def _mark_lost(self, err: LockdError) -> bool:
        with self._once:
            if self.lost.is_set():
                return False
            self.lost_reason = err
            self.lost.set()
            return True

    def __enter__(self) -> Grant:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Releases the grant. On an exception the release is bounded by
        the session's ``close_timeout`` and a failure is one warning line:
        the exception goes on undelayed and unmasked (the session's close,
        or its expiry, gives the locks back). Without one it is an ordinary
        release, whose failure is raised."""
        if self.released or self.lost.is_set() or not self.session.usable():
            return  # nothing this client could still give back
        deadline = None if et is None else time.monotonic() + self.session.close_timeout
        try:
            self.session._release(self, deadline)
        except (NotHeld, SessionNotFound, SessionLost, SessionClosed):
            pass  # lost meanwhile: lost is set
        except LockdError as e:
            if et is None:
                raise
            log.warning("lockd: releasing %s after %s failed: %s", self, et.__name__, e)


class Leadership:
    """A won election (:meth:`Session.campaign`): this session holds
    ``name`` and so leads it. A context manager: leaving the ``with``
    block resigns, as leaving a :class:`Grant`'s releases it (quiet, and
    bounded by the session's ``close_timeout`` on an exception or when the
    session is already lost).

    ``token`` is the fencing token of the hold, the term of this
    leadership: every later leader has a larger one, so pass it to what
    the leader writes to. ``value`` is what it proclaimed last. ``lost``
    is the grant's :class:`threading.Event`, set when the leadership ends
    without :meth:`resign` (revoked, the session lost, or the cluster said
    the hold is gone); ``lost_reason`` says why. ``grant`` is the
    underlying :class:`Grant`.
    """

    def __init__(self, grant: Grant, value: str) -> None:
        self.grant = grant
        self.session = grant.session
        self.name: str = grant.locks[0].name if grant.locks else ""
        self.token: int = grant.token
        self.value: str = value
        self.lost: threading.Event = grant.lost

    def __repr__(self) -> str:
        return f"<lockd.Leadership {self.name} token={self.token} lost={self.lost.is_set()}>"

    @property
    def lost_reason(self) -> LockdError | None:
        """Why the leadership was lost (None while it is not)."""
        return self.grant.lost_reason

    def proclaim(self, value: str) -> None:
        """Replaces the value observers see, keeping the leadership and its
        token (etcd's ``Proclaim``). Raises :class:`NotHeld`, and sets
        ``lost``, when this leadership is over: the hold of this token is
        gone even if the session leads again under a new one."""
        self.session.proclaim(self.name, value, token=self.token)
        self.value = value

    def resign(self) -> None:
        """Gives the leadership up (releases the hold): the next candidate
        is elected. Nothing is sent, and nothing raised, when it was lost or
        resigned before."""
        if self.grant.released or self.lost.is_set():
            return
        try:
            self.session.release(self.grant)
        except NotHeld:
            pass  # gone already: lost is set

    def __enter__(self) -> Leadership:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Resigns as :meth:`Grant.__exit__` releases."""
        self.grant.__exit__(et, ev, tb)


class _Attempt:
    """An acquire another thread may abort (lockd.aio's cancellation): the
    request id in flight, and the flag that ends the acquire."""

    def __init__(self) -> None:
        self.abort = threading.Event()
        self.request_id = ""


class Session:
    """A lockd session: it owns locks and lives while keepalives arrive
    within its TTL. A daemon thread sends them every TTL/3, failing over to
    other nodes; the session is reported lost only when the cluster says it
    is gone or no keepalive succeeded for TTL minus the safety margin.

    Use it as a context manager (``with client.session(ttl=10) as s:``): it
    is closed on exit, which releases everything it holds, within
    ``close_timeout`` seconds (see :meth:`__exit__`).
    """

    def __init__(self, client: Cluster, info: dict[str, Any], ttl: float, margin: float, sent: float,
                 on_lost: Callable[[str, int, LockdError], None] | None,
                 close_timeout: float = DEFAULT_CLOSE_TIMEOUT) -> None:
        self.client = client
        self.id: str = info["id"]
        self.name: str = info.get("name", "")
        self.ttl = ttl
        self.margin = margin
        self.on_lost = on_lost
        #: How long leaving the ``with`` block may spend closing the session.
        self.close_timeout = close_timeout
        #: Set when the session ends in any way (closed too).
        self.done = threading.Event()
        #: Set when the session ends without being closed (lost or error).
        self.lost = threading.Event()
        self.error: LockdError | None = None
        self._state: State = "alive"
        self._listeners: list[Callable[[State, LockdError | None], None]] = []
        self._mu = threading.RLock()
        self._holds: dict[str, int] = {}
        self._grants: list[Grant] = []
        self._recent: list[Revocation] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(sent,), name=f"lockd-keepalive-{self.id}",
                                        daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<lockd.Session {self.id} {self._state}>"

    # ---- state ------------------------------------------------------------

    @property
    def state(self) -> State:
        """The session's state (see :data:`State`)."""
        return self._state

    def usable(self) -> bool:
        """True while the session has not ended."""
        return self.error is None

    def add_listener(self, fn: Callable[[State, LockdError | None], None]) -> None:
        """Calls fn(state, error) on every change of state, from the
        keepalive thread (keep it short; exceptions are logged)."""
        with self._mu:
            self._listeners.append(fn)

    def _set_state(self, state: State, err: LockdError | None) -> None:
        with self._mu:
            if self._state == state or self.error is not None:
                return
            self._state = state
            listeners = list(self._listeners)
        if state == "suspended":
            log.info("lockd: session %s suspended: %s", self.id, err)
        self._notify(listeners, state, err)

    def _notify(self, listeners: list[Callable[[State, LockdError | None], None]], state: State,
                err: LockdError | None) -> None:
        for fn in listeners:
            try:
                fn(state, err)
            except Exception:  # a listener's bug must not stop keepalives
                log.exception("lockd: session listener failed")

    def _end(self, state: State, err: LockdError) -> None:
        with self._mu:
            if self.error is not None:
                return
            self._state, self.error = state, err
            listeners = list(self._listeners)
        if state != "closed":
            log.warning("lockd: session %s %s: %s", self.id, state, err)
        # The grants first: whoever waits on the session's events finds
        # them lost already.
        self._lose_where(err, lambda lk: True)
        if state != "closed":
            self.lost.set()
        self.done.set()
        self._notify(listeners, state, err)

    def _check_usable(self, what: str) -> None:
        err = self.error
        if err is not None:
            if isinstance(err, SessionClosed):
                raise SessionClosed(f"{what}: session {self.id} is closed")
            raise SessionLost(f"{what}: session {self.id} is {self._state}: {err}") from err

    # ---- keepalives -------------------------------------------------------

    def _run(self, last_ok: float) -> None:
        try:
            self._keepalives(last_ok)
        except BaseException as e:  # never die silently: report it as the session's end
            err = KeepaliveError(f"session {self.id}: keepalive thread failed: {e!r}")
            err.__cause__ = e
            self._end("error", err)

    def _keepalives(self, last_ok: float) -> None:
        interval = self.ttl / 3
        retry_every = min(interval, 0.2)
        delay = interval
        last_err: LockdError | None = None
        # The last answer a node gave since the last success (a 503 that
        # says why there is no leader): it outlives later failures that
        # say only that some node did not answer.
        answer: LockdError | None = None
        while not self._stop.wait(delay):
            now = time.monotonic()
            deadline = last_ok + self.ttl - self.margin
            if now >= deadline:
                self._end("lost", self._expired(now - last_ok, answer, last_err))
                return
            try:
                ans = self.client.keeper.keep_alive(self.id, pause=delay, attempt=max(self.ttl / 4, 0.25),
                                                    deadline=deadline)
            except (SessionNotFound, Unauthorized, Forbidden) as e:
                lost = SessionLost(f"session {self.id}: keepalive refused: {e}")
                lost.__cause__ = e
                self._end("lost", lost)
                return
            except LockdError as e:
                if self._stop.is_set():
                    return
                last_err, delay = e, retry_every
                if e.http_status:
                    answer = e
                self._set_state("suspended", answer or e)
                continue
            last_ok, delay, last_err, answer = now, interval, None, None
            self._set_state("alive", None)
            self._revoked(ans.get("revoked") or [])

    def _expired(self, since: float, answer: LockdError | None, last: LockdError | None) -> SessionLost:
        """The error of a session whose keepalives ran out: it names the
        cluster's last answer (its cause) before the last failure."""
        why = f"session {self.id}: no keepalive succeeded for {since:.1f}s (ttl {self.ttl}s)"
        if answer is not None:
            why += f"; the cluster's last answer: {answer}"
        if last is not answer:
            why += f"; last error: {last}"
        lost = SessionLost(why)
        lost.__cause__ = answer or last
        return lost

    def close(self, timeout: float | None = None) -> None:
        """Stops the keepalives and deletes the session, which releases
        everything it holds and cancels its waiting requests. Closing a
        session the cluster already forgot (or said is gone) is not an
        error and sends nothing. A session lost because no keepalive got
        through may still exist: close tries to delete it and raises
        :class:`ClusterUnavailable` (the cluster's last answer) when it
        cannot; the cluster then expires it after its TTL.

        ``timeout`` (seconds) bounds the whole close; without it the retry
        policy's ``max_elapsed`` bounds the delete (30s by default).
        Leaving the ``with`` block closes with the session's
        ``close_timeout`` instead (:meth:`__exit__`).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        prior = self._stop_keepalives(deadline)
        if isinstance(prior, SessionClosed) or (
                prior is not None and isinstance(prior.__cause__, (SessionNotFound, Unauthorized, Forbidden))):
            return  # closed before, or the cluster said it is gone
        self._delete(deadline)

    def _stop_keepalives(self, deadline: float | None) -> LockdError | None:
        """Stops the keepalive thread, ends the session as closed and
        returns how it had ended before (None: it lived). With a deadline
        it does not wait for a keepalive in flight: the thread ends after
        it by itself, and its answer no longer counts."""
        self._stop.set()
        if deadline is None and self._thread is not threading.current_thread():
            self._thread.join()
        prior = self.error
        self._end("closed", SessionClosed(f"session {self.id} closed"))
        return prior

    def _delete(self, deadline: float | None) -> None:
        try:
            self.client.transport.do("DELETE", f"/v1/sessions/{quote(self.id)}", deadline=deadline)
        except SessionNotFound:
            pass

    def __enter__(self) -> Session:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Closes the session on leaving the ``with`` block, within
        ``close_timeout`` seconds, so that an outage neither delays nor
        masks the block's own exception (SystemExit and KeyboardInterrupt
        too) nor holds up its exit.

        A session already lost (state ``"lost"``: the cluster said it is
        gone, or no keepalive got through within its TTL) is not deleted:
        its locks count as lost already and there is nothing to give back;
        the cluster expires it after its TTL (its names stay blocked for its
        ``lock_delay``, if any). Otherwise the session is deleted; if that
        fails or runs out of time, one warning line (no traceback) says so
        and the exit goes on — the cluster expires the session after its
        TTL. Only with no exception in flight is a refusal (Unauthorized,
        Forbidden) raised. A 404 (already gone) is quiet.
        """
        deadline = time.monotonic() + self.close_timeout
        prior = self._stop_keepalives(deadline)
        if prior is not None and not isinstance(prior, KeepaliveError):
            return  # closed before, or lost: the cluster expires it
        try:
            self._delete(deadline)
        except ClusterUnavailable as e:
            log.warning("lockd: session %s not closed within %gs; the cluster expires it after its ttl of %gs: %s",
                        self.id, self.close_timeout, self.ttl, e)
        except LockdError as e:
            if et is None:
                raise
            log.warning("lockd: closing session %s after %s failed: %s", self.id, et.__name__, e)

    def info(self) -> SessionInfo:
        """The session as the cluster sees it (what it holds and waits for)."""
        return self.client.get_session(self.id)

    # ---- acquiring --------------------------------------------------------

    def lock(self, name: str, *, mode: Mode = "write", weight: int = 1, limit: int | None = None,
             wait: float | None = None, hold_ttl: float | None = None, value: str = "") -> Grant:
        """Acquires one lock and returns the :class:`Grant` (a context
        manager that releases it).

        ``wait`` is how long to wait in seconds: ``None`` until granted,
        ``0`` a try-lock (raises :class:`Locked` at once if it is taken).
        When it runs out, :class:`Timeout` is raised and nothing is held.
        ``mode="read"`` shares the lock with other readers; ``limit`` and
        ``weight`` make it a semaphore; ``hold_ttl`` releases it by itself
        that many seconds after the grant. ``value`` is what the hold says
        about its holder (see :class:`LockSpec`; :meth:`proclaim` replaces
        it).
        """
        return self.acquire([LockSpec(name, mode, weight, limit, value)], wait=wait, hold_ttl=hold_ttl)

    def rlock(self, name: str, *, wait: float | None = None, hold_ttl: float | None = None,
              value: str = "") -> Grant:
        """Acquires name shared with other readers."""
        return self.lock(name, mode="read", wait=wait, hold_ttl=hold_ttl, value=value)

    def try_lock(self, name: str, *, mode: Mode = "write", hold_ttl: float | None = None, value: str = "") -> Grant:
        """Acquires name only if it is free right now; else raises
        :class:`Locked` (one request, never a spin or a queued waiter)."""
        return self.lock(name, mode=mode, wait=0, hold_ttl=hold_ttl, value=value)

    def semaphore(self, name: str, limit: int, *, weight: int = 1, wait: float | None = None,
                  hold_ttl: float | None = None, value: str = "") -> Grant:
        """Takes ``weight`` permits of the semaphore ``name`` of ``limit``
        permits (every user must agree on limit: else LimitMismatch)."""
        return self.lock(name, weight=weight, limit=limit, wait=wait, hold_ttl=hold_ttl, value=value)

    def campaign(self, name: str, value: str, *, wait: float | None = None) -> Leadership:
        """Stands for election on name with value (such as this replica's
        address): queues as a candidate, first come first served, and
        returns the :class:`Leadership` once this session leads, that is
        holds name (a write lock carrying value). ``wait`` as in
        :meth:`lock`: ``None`` campaigns until elected; past a number of
        seconds :class:`Timeout` is raised and the candidacy withdrawn.

        A context manager: leaving the ``with`` block resigns. etcd's
        ``Election.Campaign``; kazoo's ``Election.run``.
        """
        return Leadership(self.lock(name, wait=wait, value=value), value)

    def acquire(self, locks: Sequence[LockSpec | str], *, require: Require = "all", wait: float | None = None,
                hold_ttl: float | None = None, _attempt: _Attempt | None = None) -> Grant:
        """Acquires several locks atomically: ``all`` of them, ``any`` one
        or a ``majority`` (never a useless subset). ``grant.locks`` lists
        what was granted. ``wait`` and ``hold_ttl`` as in :meth:`lock`."""
        specs = [LockSpec(x) if isinstance(x, str) else x for x in locks]
        if not specs:
            raise ValueError("acquire: no locks named")
        if wait is not None and wait < 0:
            raise ValueError(f"acquire: negative wait {wait}")
        what = specs[0].name + (f" (+{len(specs) - 1} more)" if len(specs) > 1 else "")
        self._check_usable(f"acquire {what}")
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            w = MAX_WAIT if deadline is None else max(deadline - time.monotonic(), 0.0) if wait else 0.0
            body: dict[str, Any] = {"session": self.id, "request_id": new_request_id(),
                                    "locks": [s.wire() for s in specs], "require": require,
                                    "wait": format_duration(w)}
            if hold_ttl:
                body["hold_ttl"] = format_duration(hold_ttl)
            sent = time.monotonic()
            try:
                g = self._request(body, w, _attempt)
            except SessionNotFound as e:
                self._note_lost(e)
                raise
            except Timeout:
                # The server ended the request (its wait is capped below
                # ours): a new one cannot double-acquire.
                if wait != 0 and (deadline is None or deadline - time.monotonic() > MIN_RETRY_WAIT) and \
                        not (_attempt and _attempt.abort.is_set()):
                    continue
                raise
            if hold_ttl:
                g.deadline = sent + hold_ttl
            self._granted(g)
            return g

    def _request(self, body: dict[str, Any], wait: float, attempt: _Attempt | None) -> Grant:
        """Sees one request id to its end: posts it, and re-attaches by id
        when the answer is lost."""
        rid = body["request_id"]
        if attempt:
            attempt.request_id = rid
        t = self.client.transport
        while True:
            if attempt and attempt.abort.is_set():
                raise Cancelled(f"request {rid} cancelled before it was sent")
            try:
                ans = t.do("POST", "/v1/acquire", body=body, retry=Retry.NEVER, wait=wait)
                return Grant(self, ans.data)
            except ClusterUnavailable:
                pass  # unknown outcome: find the request wherever the cluster is now
            try:
                return self._reattach(rid, wait, attempt)
            except RequestNotFound:
                continue  # never seen: the same id again cannot double it

    def _reattach(self, rid: str, wait: float, attempt: _Attempt | None) -> Grant:
        """Long-polls the request until it ends; cancels it when its wait
        (plus a grace) has passed or the acquire was aborted."""
        t = self.client.transport
        give_up = time.monotonic() + wait + REATTACH_GRACE
        while True:
            if (attempt and attempt.abort.is_set()) or time.monotonic() > give_up:
                return self._cancel(rid)
            poll = min(wait, max(give_up - time.monotonic(), 0.0), 30.0)
            # The session names the request: ids are each session's own.
            st = t.do("GET", f"/v1/requests/{quote(rid)}", query={"wait": format_duration(poll), "session": self.id},
                      wait=poll).data
            status = st.get("status", "")
            if status == "granted":
                return Grant(self, st)
            if status != "pending":
                raise error_for(status, f"request {rid} ended {status}")
            if wait == 0:
                time.sleep(0.02)  # a try cannot stay pending: the read raced the proposal

    def _cancel(self, rid: str) -> Grant:
        """Withdraws a request; a grant that won the race is released. Always raises."""
        try:
            st = self.client.transport.do("DELETE", f"/v1/requests/{quote(rid)}", query={"session": self.id}).data
        except (RequestNotFound, SessionNotFound):
            st = {}
        if st.get("status") == "granted":
            g = Grant(self, st)
            self._granted(g)
            self.release(g)
        raise Timeout(f"request {rid} not granted within its wait (cancelled)")

    # ---- releasing --------------------------------------------------------

    def release(self, grant: Grant) -> None:
        """Releases one hold of every lock the grant got. After a lost
        answer it asks the cluster for the request's state before
        resending: a request is released once, so it is never counted down
        twice."""
        self._release(grant, None)

    def _release(self, grant: Grant, deadline: float | None) -> None:
        """release, its calls bounded by deadline (time.monotonic())."""
        body = {"session": self.id, "request_id": grant.request_id}
        while True:
            try:
                self.client.transport.do("POST", "/v1/release", body=body, retry=Retry.UNSENT, deadline=deadline)
                break
            except OutcomeUnknown as e:
                if self._request_released(grant.request_id, e, deadline):
                    break
            except LockdError as e:
                self._note_lost(e)
                if isinstance(e, NotHeld):
                    for n in grant.names():
                        self._not_held(n, e)
                raise
        grant.released = True
        self._released(grant.names())

    def _request_released(self, rid: str, cause: OutcomeUnknown, deadline: float | None) -> bool:
        """Whether a release of request rid whose outcome is unknown took
        effect (the request says "released"); False when it did not
        ("granted": resend); OutcomeUnknown when the cluster cannot say."""
        st = self.client.transport.do("GET", f"/v1/requests/{quote(rid)}", query={"session": self.id},
                                      deadline=deadline).data
        status = st.get("status", "")
        if status == "released":
            return True
        if status == "granted":
            return False
        raise OutcomeUnknown(f"release of request {rid}: the request is {status or 'unknown'}") from cause

    def unlock(self, name: str) -> None:
        """Releases one hold of name (a reentrant hold counts down by one);
        :class:`NotHeld` when the session does not hold it. After a lost
        answer it asks the cluster before resending, so a reentrant hold is
        never counted down twice."""
        self._check_usable(f"unlock {name}")
        body = {"session": self.id, "name": name}
        while True:
            try:
                self.client.transport.do("POST", "/v1/release", body=body, retry=Retry.UNSENT)
                self._released([name])
                return
            except OutcomeUnknown as e:
                if self._release_applied(name, e):
                    self._released([name])
                    return
            except LockdError as e:
                self._note_lost(e)
                if isinstance(e, NotHeld):
                    self._not_held(name, e)
                raise

    def _release_applied(self, name: str, cause: OutcomeUnknown) -> bool:
        info = self.client.get_session(self.id)
        self._revoked([{"name": r.name, "token": r.token, "index": r.index} for r in info.revoked])
        on_server = next((h.count for h in info.held if h.name == name), 0)
        with self._mu:
            mine = self._holds.get(name, 0)
        if on_server == 0 or (mine > 0 and on_server < mine):
            return True
        if mine > 0 and on_server == mine:
            return False  # not applied: resend
        raise OutcomeUnknown(f"unlock {name}: held {on_server} time(s), this client counted {mine}") from cause

    def surrender(self, name: str) -> bool:
        """Hands a held lock to the sessions waiting for it; this session
        queues again behind them and gets it back, with a new token, when
        they are done. Returns whether anyone was waiting."""
        self._check_usable(f"surrender {name}")
        try:
            ans = self.client.transport.do("POST", "/v1/surrender", body={"session": self.id, "name": name},
                                           retry=Retry.UNSENT)
        except LockdError as e:
            self._note_lost(e)
            raise
        if ans.data.get("status") == "surrendered":
            with self._mu:
                self._holds.pop(name, None)
            return True
        return False

    def proclaim(self, name: str, value: str, *, token: int = 0) -> int:
        """Replaces the value of this session's hold on name, keeping the
        hold and its fencing token (``POST /v1/proclaim``); returns the
        name's version. With ``token``, only a hold with that fencing token
        takes it: a proclaim of a leadership lost meanwhile is refused even
        if the session won the name again. Raises :class:`NotHeld` when the
        session does not hold it (released, revoked or expired: a hold
        that is gone stays gone), marking its grants of name lost. Sent
        again after a lost answer: the same value twice changes nothing."""
        self._check_usable(f"proclaim {name}")
        body: dict[str, Any] = {"session": self.id, "name": name, "value": value}
        if token:
            body["token"] = token
        try:
            ans = self.client.transport.do("POST", "/v1/proclaim", body=body)
        except LockdError as e:
            self._note_lost(e)
            if isinstance(e, NotHeld):
                self._not_held(name, e, token)
            raise
        return int((ans.data or {}).get("version", 0))

    # ---- tracking holds and losses ----------------------------------------

    def _note_lost(self, err: LockdError) -> None:
        if isinstance(err, SessionNotFound):
            lost = SessionLost(f"session {self.id}: {err}")
            lost.__cause__ = err
            self._end("lost", lost)

    def _granted(self, g: Grant) -> None:
        gone: list[Revocation] = []
        with self._mu:
            for lk in g.locks:
                rv = next((r for r in self._recent if r.name == lk.name and r.token == lk.token), None)
                if rv is not None:
                    gone.append(rv)
                    continue
                self._holds[lk.name] = self._holds.get(lk.name, 0) + 1
            self._grants.append(g)
        for rv in gone:
            self._lose_revoked(rv)
        if self.error is not None:
            self._lose_where(self.error, lambda lk: True)

    def _released(self, names: list[str]) -> None:
        with self._mu:
            for n in names:
                self._count_down(n)
            self._grants = [g for g in self._grants if any(self._holds.get(lk.name, 0) > 0 for lk in g.locks)]

    def _count_down(self, name: str) -> None:
        if self._holds.get(name, 0) <= 1:
            self._holds.pop(name, None)
        else:
            self._holds[name] -= 1

    def _not_held(self, name: str, err: LockdError, token: int = 0) -> None:
        """The cluster said the session does not hold name (with token:
        no hold of name with that fencing token): its grants of it are
        lost."""
        lost = NotHeld(f"session {self.id} does not hold {name}: {err.message}")
        if not token:
            with self._mu:
                self._holds.pop(name, None)
            self._lose_where(lost, lambda lk: lk.name == name)
            return
        # A hold of name with another token (won again) is still held.
        for _ in self._lose_where(lost, lambda lk: lk.name == name and lk.token == token):
            with self._mu:
                self._count_down(name)

    def _revoked(self, items: list[dict[str, Any]]) -> None:
        for d in items:
            rv = Revocation(d.get("name", ""), d.get("token", 0), d.get("index", 0))
            with self._mu:
                if rv in self._recent:
                    continue
                self._recent = (self._recent + [rv])[-RECENT_REVOCATIONS:]
            for g in self._lose_revoked(rv):
                with self._mu:
                    self._count_down(rv.name)

    def _lose_revoked(self, rv: Revocation) -> list[Grant]:
        err = Revoked(f"{rv.name} (token {rv.token}) revoked by an operator at index {rv.index}")
        return self._lose_where(err, lambda lk: lk.name == rv.name and lk.token == rv.token)

    def _lose_where(self, err: LockdError, match: Callable[[GrantedLock], bool]) -> list[Grant]:
        """Marks lost every tracked grant with a lock match accepts, and
        calls on_lost (on a thread of its own) for those locks."""
        with self._mu:
            lost = [g for g in self._grants if any(match(lk) for lk in g.locks)]
            self._grants = [g for g in self._grants if g not in lost]
        for g in lost:
            if not g._mark_lost(err) or self.on_lost is None:
                continue
            for lk in g.locks:
                if match(lk):
                    threading.Thread(target=self.on_lost, args=(lk.name, lk.token, err), daemon=True).start()
        return lost
