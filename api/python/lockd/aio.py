"""An asyncio front over the same core as the threaded client.

Every call runs the blocking client in a worker thread
(:func:`asyncio.to_thread`), so the event loop is never blocked; the
keepalives are the same daemon thread as in the threaded client. What it
does not do: it is not a non-blocking reimplementation (each waiting call
occupies a thread of the default executor), and callbacks (``on_lost``,
session listeners) run on threads, not on the loop — use
``grant.lost_async()`` or ``session.wait_lost()`` to await them.

Cancelling an acquire (``asyncio.wait_for``, ``task.cancel()``) cancels the
request on the server (``DELETE /v1/requests/{id}``); a grant that won the
race is released, so a cancelled ``lock()`` never leaves a hold or a
waiter behind::

    async with lockd.aio.Client(["127.0.0.1:7001"]) as client:
        async with await client.session(ttl=10) as s:
            async with await s.lock("jobs/backup", wait=30) as grant:
                await do_work(grant.token)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import typing
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator, Sequence
from types import TracebackType
from typing import Any, TypeVar

from . import client as sync_client
from . import session as sync_session
from .errors import LockdError, RequestNotFound
from ._transport import quote
from .session import State, _Attempt
from .types import Leader, LockInfo, LockSpec, Mode, Require, RevokedHold, Rule, SessionInfo, Status, Token

T = TypeVar("T")

# How long a cancelled acquire keeps trying to withdraw its request.
CANCEL_FOR = 10.0


async def _wait_event(ev: threading.Event) -> None:
    while not await asyncio.to_thread(ev.wait, 1.0):
        pass


def _start(fn: Callable[[], T], name: str) -> concurrent.futures.Future[T]:
    """Runs fn on a daemon thread of its own and returns its outcome's
    future. Not the loop's default executor: a call that may wait long
    (an acquire, a long-poll) and that the caller abandons would hold up
    that executor's shutdown, and so the end of ``asyncio.run``."""
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as e:
            done.set_exception(e)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


async def _iterate(it: Iterator[T], name: str) -> AsyncIterator[T]:
    """Yields what the blocking iterator it yields, advancing it on
    threads of their own (_start), until it ends; closes it when the
    caller stops iterating between items."""
    end = object()
    try:
        while True:
            item = await asyncio.wrap_future(_start(lambda: next(it, end), name))
            if item is end:
                return
            yield typing.cast(T, item)
    finally:
        close = getattr(it, "close", None)
        try:
            if close is not None:
                close()
        except ValueError:
            pass  # cancelled while a thread advances it: it ends with that call


class Grant:
    """The asyncio view of a :class:`lockd.Grant` (same fields); an async
    context manager that releases it on exit."""

    def __init__(self, grant: sync_session.Grant) -> None:
        self.sync = grant
        self.token = grant.token
        self.locks = grant.locks
        self.request_id = grant.request_id
        self.lost = grant.lost

    @property
    def lost_reason(self) -> LockdError | None:
        """Why the grant was lost (None while it is not)."""
        return self.sync.lost_reason

    async def lost_async(self) -> LockdError | None:
        """Waits until the grant is lost and returns why."""
        await _wait_event(self.sync.lost)
        return self.sync.lost_reason

    async def release(self) -> None:
        """Releases one hold of every lock of this grant."""
        await asyncio.to_thread(self.sync.release)

    async def __aenter__(self) -> Grant:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.sync.__exit__, et, ev, tb)


class Leadership:
    """The asyncio view of a :class:`lockd.Leadership` (same fields); an
    async context manager that resigns on exit."""

    def __init__(self, lead: sync_session.Leadership) -> None:
        self.sync = lead
        self.name = lead.name
        self.token = lead.token
        self.lost = lead.lost

    @property
    def value(self) -> str:
        """What this leadership proclaimed last."""
        return self.sync.value

    @property
    def lost_reason(self) -> LockdError | None:
        """Why the leadership was lost (None while it is not)."""
        return self.sync.lost_reason

    async def lost_async(self) -> LockdError | None:
        """Waits until the leadership is lost and returns why."""
        await _wait_event(self.sync.lost)
        return self.sync.lost_reason

    async def proclaim(self, value: str) -> None:
        """See :meth:`lockd.Leadership.proclaim`."""
        await asyncio.to_thread(self.sync.proclaim, value)

    async def resign(self) -> None:
        """See :meth:`lockd.Leadership.resign`."""
        await asyncio.to_thread(self.sync.resign)

    async def __aenter__(self) -> Leadership:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.sync.__exit__, et, ev, tb)


class Campaign:
    """What :meth:`Session.campaign` returns: awaited, the
    :class:`Leadership` once elected; in ``async with``, the same, resigned
    on exit. The campaign starts when it is awaited or entered."""

    def __init__(self, run: Callable[[], Coroutine[Any, Any, Leadership]]) -> None:
        self._run = run
        self._lead: Leadership | None = None

    def __await__(self) -> Generator[Any, None, Leadership]:
        return self._run().__await__()

    async def __aenter__(self) -> Leadership:
        self._lead = await self._run()
        return self._lead

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._lead is not None:
            await self._lead.__aexit__(et, ev, tb)


class Session:
    """The asyncio view of a :class:`lockd.Session`."""

    def __init__(self, s: sync_session.Session) -> None:
        self.sync = s
        self.id = s.id
        self.lost = s.lost
        self.done = s.done

    @property
    def state(self) -> State:
        """The session's state (see :data:`lockd.State`)."""
        return self.sync.state

    def add_listener(self, fn: Callable[[State, LockdError | None], None]) -> None:
        """See :meth:`lockd.Session.add_listener` (fn runs on the keepalive thread)."""
        self.sync.add_listener(fn)

    async def wait_lost(self) -> LockdError | None:
        """Waits until the session ends and returns why."""
        await _wait_event(self.sync.done)
        return self.sync.error

    async def lock(self, name: str, *, mode: Mode = "write", weight: int = 1, limit: int | None = None,
                   wait: float | None = None, hold_ttl: float | None = None, value: str = "") -> Grant:
        """See :meth:`lockd.Session.lock`; cancellation withdraws the request."""
        return await self.acquire([LockSpec(name, mode, weight, limit, value)], wait=wait, hold_ttl=hold_ttl)

    async def try_lock(self, name: str, *, mode: Mode = "write", value: str = "") -> Grant:
        """See :meth:`lockd.Session.try_lock`."""
        return await self.lock(name, mode=mode, wait=0, value=value)

    def campaign(self, name: str, value: str, *, wait: float | None = None) -> Campaign:
        """See :meth:`lockd.Session.campaign`: ``async with
        s.campaign(name, value) as lead:`` resigns on exit, and ``lead =
        await s.campaign(name, value)`` returns the :class:`Leadership`.
        Cancelling it withdraws the candidacy as a cancelled
        :meth:`acquire` does."""
        return Campaign(lambda: self._campaign(name, value, wait))

    async def _campaign(self, name: str, value: str, wait: float | None) -> Leadership:
        g = await self.acquire([LockSpec(name, value=value)], wait=wait)
        return Leadership(sync_session.Leadership(g.sync, value))

    async def proclaim(self, name: str, value: str, *, token: int = 0) -> int:
        """See :meth:`lockd.Session.proclaim`."""
        return await asyncio.to_thread(self.sync.proclaim, name, value, token=token)

    async def acquire(self, locks: Sequence[LockSpec | str], *, require: Require = "all",
                      wait: float | None = None, hold_ttl: float | None = None) -> Grant:
        """See :meth:`lockd.Session.acquire`; cancellation withdraws the request."""
        attempt = _Attempt()
        done = _start(lambda: self.sync.acquire(locks, require=require, wait=wait, hold_ttl=hold_ttl,
                                                _attempt=attempt), "lockd-aio-acquire")
        answer = asyncio.wrap_future(done)
        try:
            return Grant(await asyncio.shield(answer))
        except asyncio.CancelledError:
            # The outcome is handled by _withdraw: mark it retrieved.
            answer.add_done_callback(lambda f: f.cancelled() or f.exception())
            await asyncio.to_thread(self._withdraw, attempt, done)
            raise

    def _withdraw(self, attempt: _Attempt, fut: concurrent.futures.Future[sync_session.Grant]) -> None:
        """Cancels the request in flight and releases a grant that won the race."""
        attempt.abort.set()
        said_granted = False
        end = time.monotonic() + CANCEL_FOR
        while not fut.done() and time.monotonic() < end:
            rid = attempt.request_id
            if not rid:
                time.sleep(0.02)  # the acquire thread has not made its request yet
                continue
            try:
                st = self.sync.client.transport.do("DELETE", f"/v1/requests/{quote(rid)}",
                                                   query={"session": self.id}).data or {}
                said_granted = st.get("status") == "granted"
                break
            except RequestNotFound:
                time.sleep(0.05)  # not applied yet: wait for the POST
            except LockdError:
                break
        while not fut.done() and time.monotonic() < end:
            time.sleep(0.02)
        if fut.done() and fut.exception() is None:
            g = fut.result()
            try:
                self.sync.release(g)
            except LockdError:
                pass
        elif said_granted:
            try:
                self.sync.client.transport.do("POST", "/v1/release",
                                              body={"session": self.id, "request_id": attempt.request_id})
            except LockdError:
                pass

    async def unlock(self, name: str) -> None:
        """See :meth:`lockd.Session.unlock`."""
        await asyncio.to_thread(self.sync.unlock, name)

    async def surrender(self, name: str) -> bool:
        """See :meth:`lockd.Session.surrender`."""
        return await asyncio.to_thread(self.sync.surrender, name)

    async def info(self) -> SessionInfo:
        """See :meth:`lockd.Session.info`."""
        return await asyncio.to_thread(self.sync.info)

    async def close(self, timeout: float | None = None) -> None:
        """See :meth:`lockd.Session.close` (``timeout`` bounds it)."""
        await asyncio.to_thread(self.sync.close, timeout)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        """Closes the session as :meth:`lockd.Session.__exit__` does:
        within its ``close_timeout``, quietly for a session already lost."""
        await asyncio.to_thread(self.sync.__exit__, et, ev, tb)


class Client:
    """The asyncio view of a :class:`lockd.Client`; the same arguments."""

    def __init__(self, addrs: Sequence[str] | str | None = None, **kwargs: Any) -> None:
        self.sync = sync_client.Client(addrs, **kwargs)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None

    async def session(self, ttl: float = 15.0, **kwargs: Any) -> Session:
        """See :meth:`lockd.Client.session`."""
        return Session(await asyncio.to_thread(self.sync.session, ttl, **kwargs))

    async def check(self, name: str, token: int, *, timeout: float | None = None, stale: bool = False) -> bool:
        """See :meth:`lockd.Client.check` (``timeout`` bounds the whole call)."""
        return await asyncio.to_thread(self.sync.check, name, token, timeout=timeout, stale=stale)

    async def status(self) -> Status:
        """See :meth:`lockd.Client.status`."""
        return await asyncio.to_thread(self.sync.status)

    async def locks(self, prefix: str = "") -> list[LockInfo]:
        """See :meth:`lockd.Client.locks`."""
        return await asyncio.to_thread(self.sync.locks, prefix)

    async def get_lock(self, name: str) -> LockInfo | None:
        """See :meth:`lockd.Client.get_lock`."""
        return await asyncio.to_thread(self.sync.get_lock, name)

    async def revoke(self, name: str) -> list[RevokedHold]:
        """See :meth:`lockd.Client.revoke`."""
        return await asyncio.to_thread(self.sync.revoke, name)

    async def create_token(self, name: str, rules: Sequence[Rule | tuple[str, str]]) -> Token:
        """See :meth:`lockd.Client.create_token`."""
        return await asyncio.to_thread(self.sync.create_token, name, rules)

    async def watch(self, name: str, *, wait: float = 30.0) -> AsyncIterator[LockInfo | None]:
        """See :meth:`lockd.Client.watch`: an async generator."""
        async for info in _iterate(self.sync.watch(name, wait=wait), "lockd-aio-watch"):
            yield info

    async def leader(self, name: str, *, stale: bool = False) -> Leader | None:
        """See :meth:`lockd.Client.leader`."""
        return await asyncio.to_thread(self.sync.leader, name, stale=stale)

    async def observe(self, name: str, *, timeout: float | None = None) -> AsyncIterator[Leader]:
        """See :meth:`lockd.Client.observe`: an async generator (``async
        for leader in client.observe(name)``)."""
        async for lead in _iterate(self.sync.observe(name, timeout=timeout), "lockd-aio-observe"):
            yield lead
