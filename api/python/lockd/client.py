"""The lockd client: configuration, reads, revoke and ACL tokens."""

from __future__ import annotations

import http.client
import logging
import os
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ._transport import (JSON, Answer, Retry, RetryPolicy, Transport, _TransportError, decode_error, normalize_endpoint,
                         quote)
from ._keeper import Keeper
from .errors import ClusterUnavailable, LockdError, LockNotFound, TLSError
from .session import DEFAULT_CLOSE_TIMEOUT, Session
from .types import Leader, LockInfo, RevokedHold, Rule, SessionInfo, Status, Token, format_duration

#: The environment variables read like the Go client and lockctl do.
ENV_ADDR, ENV_TOKEN = "LOCKD_ADDR", "LOCKD_TOKEN"
ENV_CACERT, ENV_CLIENT_CERT, ENV_CLIENT_KEY = "LOCKD_CACERT", "LOCKD_CLIENT_CERT", "LOCKD_CLIENT_KEY"

log = logging.getLogger("lockd")

#: How many items the list calls ask for at a time.
PAGE_SIZE = 1000


def tls_context(ca_cert: str | None, client_cert: str | None, client_key: str | None) -> ssl.SSLContext | None:
    """The SSL context of a client that trusts the CA in ca_cert (the
    system roots when None) and presents client_cert/client_key if given;
    None (plain HTTP) when all three are None or empty."""
    if not (ca_cert or client_cert or client_key):
        return None
    ctx = ssl.create_default_context(cafile=ca_cert or None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if client_cert or client_key:
        if not (client_cert and client_key):
            raise ValueError("a client certificate needs both client_cert and client_key")
        ctx.load_cert_chain(client_cert, client_key)
    return ctx


class Client:
    """A client of a lockd cluster; safe to share between threads.

    ``addrs`` are ``host:port`` or ``http(s)://host:port`` addresses (a
    list, or one comma-separated string); one node is enough, the others
    are learned from it. Unset arguments are read from ``LOCKD_ADDR``,
    ``LOCKD_TOKEN``, ``LOCKD_CACERT``, ``LOCKD_CLIENT_CERT`` and
    ``LOCKD_CLIENT_KEY``; a CA or a client certificate switches HTTPS on.
    ``retry`` bounds retries, attempts and connects (:class:`RetryPolicy`);
    ``close_timeout`` (seconds) is how long leaving a session's ``with``
    block may spend closing it, the default of :meth:`session`. The client
    does no I/O until the first call, which learns the leader.
    """

    def __init__(self, addrs: Sequence[str] | str | None = None, *, token: str | None = None,
                 ca_cert: str | None = None, client_cert: str | None = None, client_key: str | None = None,
                 ssl_context: ssl.SSLContext | None = None, retry: RetryPolicy | None = None,
                 close_timeout: float = DEFAULT_CLOSE_TIMEOUT) -> None:
        if addrs is None:
            addrs = os.environ.get(ENV_ADDR, "")
        if isinstance(addrs, str):
            addrs = [a for a in (x.strip() for x in addrs.split(",")) if a]
        if not addrs:
            raise ValueError(f"lockd: no addresses given and {ENV_ADDR} is empty")
        if token is None:
            token = os.environ.get(ENV_TOKEN, "").strip()
        if ssl_context is None:
            ssl_context = tls_context(ca_cert if ca_cert is not None else os.environ.get(ENV_CACERT),
                                      client_cert if client_cert is not None else os.environ.get(ENV_CLIENT_CERT),
                                      client_key if client_key is not None else os.environ.get(ENV_CLIENT_KEY))
        endpoints = [normalize_endpoint(a, ssl_context is not None) for a in addrs]
        self.transport = Transport(endpoints, token=token, ssl_context=ssl_context, policy=retry or RetryPolicy())
        #: Sends the sessions' keepalives, batched.
        self.keeper = Keeper(self.transport)
        self.close_timeout = close_timeout

    @property
    def endpoints(self) -> list[str]:
        """The base URLs the client knows: configured, then learned."""
        return list(self.transport.endpoints)

    @property
    def leader_url(self) -> str:
        """The base URL of the cluster's leader node as last learned (""
        when unknown). (The leader of an election is :meth:`leader`.)"""
        return self.transport.leader

    # ---- sessions ---------------------------------------------------------

    def session(self, ttl: float = 15.0, *, name: str | None = None, on_deadlock: str | None = None,
                ordered: bool = False, lock_delay: float | None = None, safety_margin: float | None = None,
                on_lost: Callable[[str, int, LockdError], None] | None = None,
                close_timeout: float | None = None) -> Session:
        """Creates a session with a TTL in seconds (1 to 86400) and starts
        its keepalive thread. Use it in a ``with`` block to close it.

        ``on_deadlock`` is ``"abort"`` (default) or ``"surrender"``;
        ``ordered`` sessions may only ask for names sorting after what they
        hold; ``lock_delay`` keeps its locks blocked that long after it
        expires. ``safety_margin`` (default TTL/5, at least 0.2s) is how
        long before the TTL runs out, counted from the last successful
        keepalive, the session is reported lost. ``on_lost(name, token,
        error)`` is called, on a thread of its own, for every lock lost
        without being released. ``close_timeout`` (default: the client's,
        2s) bounds closing the session when its ``with`` block is left
        (see :meth:`Session.__exit__`).
        """
        margin = safety_margin if safety_margin is not None else max(ttl / 5, 0.2)
        if margin >= ttl - ttl / 3:
            raise ValueError(f"safety margin {margin}s leaves no time for a keepalive within ttl {ttl}s")
        body: dict[str, Any] = {"ttl": format_duration(ttl)}
        if name:
            body["name"] = name
        if on_deadlock:
            body["on_deadlock"] = on_deadlock
        if ordered:
            body["ordered"] = True
        if lock_delay:
            body["lock_delay"] = format_duration(lock_delay)
        sent = time.monotonic()
        # Safe to repeat: a session made by an attempt whose answer was
        # lost holds nothing and expires after its TTL.
        info = self.transport.do("POST", "/v1/sessions", body=body).data
        return Session(self, info, ttl, margin, sent, on_lost,
                       self.close_timeout if close_timeout is None else close_timeout)

    def get_session(self, session_id: str) -> SessionInfo:
        """A session as the cluster sees it; SessionNotFound when gone."""
        return SessionInfo.of(self.transport.do("GET", f"/v1/sessions/{quote(session_id)}").data)

    def sessions(self, *, stale: bool = False) -> list[SessionInfo]:
        """Every session the token may see (a management token: all)."""
        return [SessionInfo.of(d) for d in self._list("/v1/sessions", {}, stale)]

    # ---- observing --------------------------------------------------------

    def status(self) -> Status:
        """/v1/status of the node the client talks to (the leader when known)."""
        return Status.of(self.transport.do("GET", "/v1/status").data)

    def check(self, name: str, token: int, *, timeout: float | None = None, stale: bool = False) -> bool:
        """True while token is the fencing token of a current hold on name
        (or on an ancestor of name): what a protected resource asks before
        acting for a holder.

        The answer is linearizable: the client asks the leader, which
        confirms its leadership (read-index) before answering, so a token
        revoked or expired before the call is never called valid. It
        therefore needs a leader: during an election it fails over like
        any call. ``timeout`` (seconds) bounds the whole call, retries and
        failovers included (without it, the retry policy's
        ``max_elapsed``); past it :class:`ClusterUnavailable` is raised,
        and the resource should refuse the holder. A node that takes no
        connection costs the policy's ``connect_timeout`` (1s) before the
        next is tried.

        ``stale=True`` asks whichever node the client talks to for its own
        table as it is (``GET /v1/check?stale``): it answers without a
        leader, but a node cut off from the cluster may call valid a token
        that has been revoked or expired meanwhile. Not for a fencing
        decision.
        """
        return self.check_token(name, token, timeout=timeout, stale=stale)[0]

    def check_token(self, name: str, token: int, *, timeout: float | None = None,
                    stale: bool = False) -> tuple[bool, int]:
        """(valid, current): check's answer and the newest token of a
        current hold on name (0: not held); ``timeout`` and ``stale`` as
        in :meth:`check`."""
        q = {"name": name, "token": str(token)}
        if stale:
            q["stale"] = ""
        deadline = None if timeout is None else time.monotonic() + timeout
        d = self.transport.do("GET", "/v1/check", query=q, deadline=deadline).data
        return bool(d.get("valid")), int(d.get("token", 0))

    def get_lock(self, name: str, *, stale: bool = False) -> LockInfo | None:
        """One name's holders and waiters; None when nobody holds, waits
        for or delays it."""
        try:
            return LockInfo.of(self.transport.do("GET", "/v1/locks/" + _escape_name(name),
                                                 query={"stale": ""} if stale else None).data)
        except LockNotFound:
            return None

    def locks(self, prefix: str = "", *, stale: bool = False) -> list[LockInfo]:
        """Every name in use under prefix that the token may read, sorted."""
        return [LockInfo.of(d) for d in self._list("/v1/locks", {"prefix": prefix} if prefix else {}, stale)]

    def _list(self, path: str, query: dict[str, str], stale: bool) -> list[Any]:
        q = dict(query, limit=str(PAGE_SIZE))
        if stale:
            q["stale"] = ""
        out: list[Any] = []
        after = ""
        while True:
            if after:
                q["after"] = after
            ans = self.transport.do("GET", path, query=q)
            out.extend(ans.data or [])
            nxt = ans.headers.get("X-Next-After", "")
            if not nxt or nxt == after:
                return out
            after = nxt

    def watch(self, name: str, *, index: int = 0, wait: float = 30.0) -> Iterator[LockInfo | None]:
        """Yields name's state now and after each change (None while
        nobody holds, waits for or delays it), using blocking queries
        (``GET /v1/locks/{name}?index=V&wait=``). Runs until the caller
        stops iterating; retries across failovers like any read."""
        for data, _ in self._changes("/v1/locks/" + _escape_name(name), index=index, wait=wait):
            yield None if data is None else LockInfo.of(data)

    def _changes(self, path: str, *, index: int = 0, wait: float = 30.0, deadline: float | None = None,
                 outlast: bool = False) -> Iterator[tuple[Any, int]]:
        """Yields (body, version) of a read of one name (path) now and
        each time its version passes the last one seen, by blocking
        queries (``?index=V&wait=``); body is None for a 404
        lock_not_found. Ends at deadline (time.monotonic()). A read whose
        retries run out raises ClusterUnavailable, unless ``outlast``:
        then it is logged and the queries go on, through the transport's
        failover and backoff, for as long as the caller iterates."""
        first = True
        while True:
            w = wait
            if deadline is not None:
                w = min(wait, deadline - time.monotonic())
                if w <= 0:
                    return
            q = {"index": str(index), "wait": format_duration(w)} if index or not first else None
            try:
                ans = self.transport.do("GET", path, query=q, wait=w if q else 0.0, deadline=deadline)
                data, headers = ans.data, ans.headers
            except LockNotFound as e:
                data, headers = None, e.headers or {}
            except ClusterUnavailable as e:
                if not outlast:
                    raise
                if deadline is None or time.monotonic() < deadline:
                    log.warning("lockd: GET %s: no answer yet, still trying: %s", path, e)
                continue
            version = int(headers.get("X-Lock-Index", "0") or 0)
            # An answer older than one seen (a node behind) says nothing new.
            if first or version > index:
                yield data, version
            first = False
            index = max(version, index)

    def leader(self, name: str, *, stale: bool = False) -> Leader | None:
        """The leader of name read as an election (``GET
        /v1/elections/{name}``): its value, fencing token and since; None
        when nobody holds name. Linearizable unless ``stale``
        (whichever node answers, without a leader). etcd's
        ``Election.Leader``."""
        d = self.transport.do("GET", "/v1/elections/" + _escape_name(name),
                              query={"stale": ""} if stale else None).data or {}
        return Leader.of(d.get("leader"))

    def observe(self, name: str, *, timeout: float | None = None) -> Iterator[Leader]:
        """Yields name's leader now and after each change of leader (a new
        token) or of its value (a proclaim under the same token), each
        once, in token order: a leader with a smaller token than one
        yielded is skipped. "Nobody leads" is not yielded (as etcd's
        ``Observe`` does not): an observer waits for the next leader.

        Follows blocking queries (``GET /v1/elections/{name}?index=V``)
        through failovers and outages: when a read's retries run out it
        logs a warning and goes on. ``timeout`` (seconds) ends the
        iteration after that long; ``None`` runs until the caller stops
        iterating."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Leader | None = None
        for data, _ in self._changes("/v1/elections/" + _escape_name(name), deadline=deadline, outlast=True):
            lead = Leader.of((data or {}).get("leader"))
            if lead is None or (last is not None and (lead.token < last.token or (
                    lead.token == last.token and lead.value == last.value))):
                continue
            last = lead
            yield lead

    def events(self) -> Iterator[int]:
        """Yields the applied index of the node the client talks to, once
        at once and after each change of its table (``GET /v1/events``,
        server-sent events), reconnecting when a stream ends or a node
        fails. Runs until the caller stops iterating."""
        while True:
            try:
                yield from self._event_stream()
            except (_TransportError, ClusterUnavailable):
                time.sleep(0.2)

    def _event_stream(self) -> Iterator[int]:
        t = self.transport
        t._ensure_leader(None)
        base = t._target()
        where = f"GET /v1/events on {base}"
        try:
            conn = t.connect(base, 60.0, where)  # comments arrive every 15s
        except _TransportError:
            t._failed(base)
            raise
        headers = {"Accept": "text/event-stream"}
        if t.token:
            headers["Authorization"] = "Bearer " + t.token
        try:
            try:
                conn.request("GET", "/v1/events", headers=headers)
                resp = conn.getresponse()
            except ssl.SSLError as e:
                raise TLSError(f"GET /v1/events on {base}: {e}") from e
            except (OSError, http.client.HTTPException) as e:
                t._failed(base)
                raise _TransportError(where, e, sent=True) from e
            if resp.status != 200:
                err = decode_error(resp.status, resp.read(1 << 20))
                if not err.retry:
                    raise err
                t._failed(base)
                raise ClusterUnavailable(str(err))
            while True:
                try:
                    line = resp.readline()
                except (OSError, http.client.HTTPException) as e:
                    raise _TransportError(where, e, sent=True) from e
                if not line:
                    return  # the node ended the stream: reconnect
                if line.startswith(b"data:"):
                    yield int(line[5:].strip())
        finally:
            conn.close()

    # ---- operators ---------------------------------------------------------

    def revoke(self, name: str) -> list[RevokedHold]:
        """Releases every hold on name at once, whoever holds it (a token
        with admin on the name). The holders' tokens stop being valid and
        each holder's client learns it on its next keepalive (grant.lost).
        Not repeated after an unknown outcome: a repeat could revoke a
        grant made meanwhile."""
        d = self.transport.do("POST", "/v1/revoke", body={"name": name}, retry=Retry.UNSENT).data
        return [RevokedHold(r.get("session", ""), r.get("name", ""), r.get("token", 0)) for r in d.get("revoked") or []]

    def bootstrap_acl(self) -> Token:
        """Makes the cluster's first management token (once per cluster;
        later calls raise Forbidden)."""
        return Token.of(self.transport.do("POST", "/v1/acl/bootstrap", retry=Retry.UNSENT).data)

    def create_token(self, name: str, rules: Sequence[Rule | tuple[str, str]], *,
                     limits: dict[str, int] | None = None) -> Token:
        """Makes a token with rules, e.g. ``[Rule("jobs/", "write")]`` or
        ``[("jobs/", "write")]`` (a management token's call); ``limits``
        may override ``sessions`` and ``waiters`` per token."""
        rs = [r if isinstance(r, Rule) else Rule(*r) for r in rules]
        body: dict[str, Any] = {"name": name, "rules": [{"prefix": r.prefix, "access": r.access} for r in rs]}
        if limits:
            body["limits"] = limits
        return Token.of(self.transport.do("POST", "/v1/acl/tokens", body=body, retry=Retry.UNSENT).data)

    def tokens(self) -> list[Token]:
        """The tokens, without secrets (a management token's call)."""
        return [Token.of(d) for d in self.transport.do("GET", "/v1/acl/tokens").data or []]

    def delete_token(self, token_id: str) -> None:
        """Deletes a token: from then on no node accepts it."""
        self.transport.do("DELETE", f"/v1/acl/tokens/{quote(token_id)}")

    def call(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
             content_type: str = JSON, retry: Retry = Retry.NEVER) -> Answer:
        """Sends a call the client has no method for (one attempt unless
        retry says otherwise), with the token, TLS and leader tracking of
        this client; ``body`` is JSON-encoded unless it is bytes. Error
        answers raise the matching LockdError."""
        return self.transport.do(method, path, query=query, body=body, content_type=content_type, retry=retry)


def _escape_name(name: str) -> str:
    return "/".join(quote(s) for s in name.split("/"))


__all__ = ["Client", "RetryPolicy", "Retry", "tls_context"]
