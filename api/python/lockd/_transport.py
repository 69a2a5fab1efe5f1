"""Sending calls to a lockd cluster: leader tracking, failover and the
retries that are safe (the same rules as the Go client's transport)."""

from __future__ import annotations

import http.client
import json
import random
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .errors import ClusterUnavailable, LockdError, OutcomeUnknown, TLSError, error_for
from .types import Status


def quote(segment: str) -> str:
    """Escapes a path segment."""
    return urllib.parse.quote(segment, safe="")


class Retry(Enum):
    """When a call may be sent again after a failure."""

    #: Sending it twice has the effect of sending it once (reads,
    #: keepalives, re-attaches, cancels, session creates and deletes):
    #: retried on any transport error and on 503.
    SAFE = "safe"
    #: A second copy could act twice (release, surrender, revoke, token
    #: create): retried only when it provably did nothing (the connection
    #: failed, or the server said not_applied); else OutcomeUnknown.
    UNSENT = "unsent"
    #: One attempt; the caller handles every failure (the POST of an
    #: acquire, which re-attaches by request id instead).
    NEVER = "never"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds the retries of calls that are safe to repeat (seconds).

    ``min_backoff`` doubles per attempt up to ``max_backoff`` (with
    jitter); ``max_elapsed`` bounds one call's retries (0: no bound);
    ``attempt_timeout`` bounds one HTTP attempt on top of a long-poll's
    server-side wait (it should exceed a leader election, and is how long a
    hung node holds a call); ``connect_timeout`` bounds making the
    connection of an attempt (the TCP connect and, with TLS, the
    handshake), so that a node that answers no connection at all (a dead
    host, a stopped container: its SYNs go unanswered) costs about that
    long before the next node is tried, not the whole attempt;
    ``status_timeout`` bounds one ``/v1/status`` while learning the leader.
    """

    min_backoff: float = 0.05
    max_backoff: float = 2.0
    max_elapsed: float = 30.0
    attempt_timeout: float = 5.0
    connect_timeout: float = 1.0
    status_timeout: float = 2.0


@dataclass
class Answer:
    """A 2xx answer: its status, headers and decoded JSON body (None when
    empty)."""

    status: int
    headers: http.client.HTTPMessage
    data: Any


class _TransportError(Exception):
    """A call that got no HTTP answer; ``sent`` is False when the
    connection failed before anything was sent."""

    def __init__(self, where: str, err: BaseException, sent: bool) -> None:
        super().__init__(f"{where}: {err!r}")
        self.sent = sent


# How long a node that failed a call is avoided, and not believed when
# other nodes still name it leader (they do until their election timeout).
SUSPECT_FOR = 2.0
# How often calls look for the leader again while it is unknown.
RELEARN_EVERY = 0.5
# The largest answer read (a session closed with many holds lists them all).
MAX_ANSWER = 64 << 20
JSON = "application/json"


def normalize_endpoint(ep: str, use_tls: bool) -> str:
    """Turns ``host:port`` or ``http(s)://host:port[/]`` into a base URL;
    with ``use_tls`` the scheme is https whatever was given."""
    ep = ep.strip()
    if not ep:
        raise ValueError("empty endpoint")
    if "://" not in ep:
        ep = "http://" + ep
    u = urllib.parse.urlsplit(ep)
    if u.scheme not in ("http", "https") or not u.netloc or u.path not in ("", "/") or u.port is None:
        raise ValueError(f"endpoint {ep!r}: want host:port or http(s)://host:port")
    return ("https" if use_tls else u.scheme) + "://" + u.netloc


def _is_tls_refusal(err: ssl.SSLError) -> bool:
    """A handshake that failed for good: the certificate did not verify,
    the peer sent an alert (it refused ours), or it speaks no TLS."""
    if isinstance(err, ssl.SSLCertVerificationError):
        return True
    reason = (getattr(err, "reason", None) or "").upper()
    return "ALERT" in reason or "WRONG_VERSION" in reason or "RECORD" in reason or "UNKNOWN_PROTOCOL" in reason


def decode_error(status: int, raw: bytes) -> LockdError:
    """Turns a non-2xx answer into a LockdError. A gateway error without a
    lockd body counts as no_leader, so that it is retried like one."""
    try:
        body = json.loads(raw)
        e = body["error"]
        return error_for(str(e["code"]), str(e.get("message", "")), http_status=status,
                         not_applied=bool(e.get("not_applied")), quorum_lost=bool(e.get("quorum_lost")))
    except (ValueError, KeyError, TypeError):
        code = "no_leader" if status in (502, 503, 504) else "internal"
        return error_for(code, f"HTTP {status} without a lockd error body: {raw[:200]!r}", http_status=status)


def gave_up(what: str, answer: LockdError | None, last: Exception) -> LockdError:
    """The error of a call whose retries ran out (what says which and
    after how long): the last answer a node gave, as its own class with
    its code and message first, and the last failure when it was another;
    ClusterUnavailable with the last failure when no node answered."""
    if answer is None:
        return ClusterUnavailable(f"{what}: {last}")
    also = "" if last is answer else f"; last failure: {last}"
    return error_for(answer.code, f"{answer.message} ({what}{also})", http_status=answer.http_status,
                     not_applied=answer.not_applied, quorum_lost=answer.quorum_lost)


class Transport:
    """Sends calls to the leader (or, while it is unknown, the next
    endpoint), failing over and backing off by the call's retry class."""

    def __init__(self, endpoints: list[str], *, token: str, ssl_context: ssl.SSLContext | None,
                 policy: RetryPolicy) -> None:
        self.token = token
        self.ssl_context = ssl_context
        self.policy = policy
        self.scheme = endpoints[0].split("://", 1)[0]
        self._mu = threading.Lock()
        self.endpoints = list(dict.fromkeys(endpoints))
        self._next = 0
        self.leader = ""
        self._learned = False
        self._learned_at = 0.0
        self._down: dict[str, float] = {}
        # Those of them that gave no answer: not asked for the leader either.
        self._silent: dict[str, float] = {}

    # ---- one attempt -----------------------------------------------------

    def connect(self, base: str, timeout: float, where: str) -> http.client.HTTPConnection:
        """Opens a connection to base within the policy's connect timeout
        (at most timeout), then gives its socket timeout for what follows;
        raises TLSError, or _TransportError (nothing was sent) naming
        where (the call)."""
        u = urllib.parse.urlsplit(base)
        host, port = u.hostname or "", u.port
        within = min(self.policy.connect_timeout, timeout) if self.policy.connect_timeout > 0 else timeout
        conn: http.client.HTTPConnection
        if u.scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=within, context=self.ssl_context)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=within)
        try:
            conn.connect()
        except ssl.SSLError as e:
            conn.close()
            if _is_tls_refusal(e):
                raise TLSError(f"{where}: TLS handshake: {e}") from e
            raise _TransportError(where, e, sent=False) from e
        except TimeoutError as e:
            conn.close()
            raise _TransportError(where, TimeoutError(f"no connection within {within:g}s"), sent=False) from e
        except OSError as e:
            conn.close()
            raise _TransportError(where, e, sent=False) from e
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def send(self, base: str, method: str, path: str, *, query: dict[str, str] | None = None,
             body: Any = None, timeout: float, content_type: str = JSON) -> Answer:
        """Makes one attempt against base; raises LockdError for an error
        answer, TLSError, or _TransportError when no answer came."""
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        where = f"{method} {path} on {base}"
        headers = {"Accept": JSON}
        payload: bytes | None = None
        if body is not None:
            payload = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        conn = self.connect(base, timeout, where)
        try:
            try:
                conn.request(method, target, body=payload, headers=headers)
                resp = conn.getresponse()
                raw = resp.read(MAX_ANSWER)
            except ssl.SSLError as e:
                if _is_tls_refusal(e):
                    raise TLSError(f"{where}: TLS: {e}") from e
                raise _TransportError(where, e, sent=True) from e
            except (OSError, http.client.HTTPException) as e:
                raise _TransportError(where, e, sent=True) from e
        finally:
            conn.close()
        if resp.status // 100 != 2:
            err = decode_error(resp.status, raw)
            err.headers = resp.headers
            raise err
        try:
            data = json.loads(raw) if raw.strip() else None
        except ValueError as e:
            raise LockdError(f"{where}: decoding {raw[:200]!r}: {e}", code="internal") from e
        return Answer(resp.status, resp.headers, data)

    # ---- calls with retries ----------------------------------------------

    def do(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
           retry: Retry = Retry.SAFE, wait: float = 0.0, attempt: float | None = None,
           deadline: float | None = None, content_type: str = JSON) -> Answer:
        """Sends a call, retrying it as its class allows. ``wait`` is how
        long the server may hold it (a long-poll); ``attempt`` replaces the
        policy's attempt timeout; ``deadline`` (time.monotonic()) bounds the
        whole call, retries included. When the retries run out, the error
        is the last answer a node gave (its class, code and message: the
        cluster's own reason, such as no_leader with quorum_lost), with the
        last failure added, rather than the failure of the last node
        tried, which may be a dead one."""
        start = time.monotonic()
        per_attempt = (attempt or self.policy.attempt_timeout) + wait
        answer: LockdError | None = None  # the last retryable answer: the cluster's own reason
        for n in range(1_000_000):
            self._ensure_leader(deadline)
            target = self._target()
            timeout = per_attempt if deadline is None else max(min(per_attempt, deadline - time.monotonic()), 0.05)
            try:
                return self.send(target, method, path, query=query, body=body, timeout=timeout,
                                 content_type=content_type)
            except LockdError as e:
                if not e.retry or isinstance(e, TLSError):
                    raise  # a definite answer
                err: Exception = e
                answer, unsent = e, e.not_applied
            except _TransportError as e:
                err, unsent = e, not e.sent
            self._failed(target, answered=err is answer)
            if not (retry is Retry.SAFE or (retry is Retry.UNSENT and unsent)):
                if retry is Retry.UNSENT:
                    raise OutcomeUnknown(f"{method} {path}: sent, but no answer: {err}") from err
                raise self._unavailable(err) from err
            now = time.monotonic()
            if (self.policy.max_elapsed > 0 and now - start >= self.policy.max_elapsed) or \
                    (deadline is not None and now >= deadline):
                raise gave_up(f"{method} {path}: giving up after {n + 1} attempts in {now - start:.1f}s",
                              answer, err) from err
            time.sleep(self._pause(n, err, deadline, now))
        raise AssertionError("unreachable")

    @staticmethod
    def _unavailable(err: Exception) -> LockdError:
        if isinstance(err, LockdError):
            return err
        return ClusterUnavailable(str(err))

    def _pause(self, attempt: int, err: Exception, deadline: float | None, now: float) -> float:
        """The wait before retry attempt+1: the backoff, or at least the
        Retry-After of the node's answer, with up to 50% jitter, so that a
        herd of clients a node turned away comes back spread out. It
        leaves the call at least half its remaining time, so that a
        keepalive still has one attempt before its session's deadline."""
        pause = self._backoff(attempt)
        ra = err.retry_after if isinstance(err, LockdError) else 0.0
        if ra > 0:
            pause = max(pause, ra + random.uniform(0, ra / 2))
        if deadline is not None:
            pause = min(pause, max(deadline - now, 0) / 2)
        return pause

    def _backoff(self, attempt: int) -> float:
        d = min(self.policy.min_backoff * (2 ** min(attempt, 16)), self.policy.max_backoff)
        return float(d / 2 + random.uniform(0, d / 2))

    # ---- leader tracking -------------------------------------------------

    def _target(self) -> str:
        with self._mu:
            if self.leader:
                return self.leader
            now = time.monotonic()
            for i in range(len(self.endpoints)):
                e = self.endpoints[(self._next + i) % len(self.endpoints)]
                if now >= self._down.get(e, 0.0):
                    return e
            return self.endpoints[self._next % len(self.endpoints)]

    def _failed(self, base: str, answered: bool = False) -> None:
        """Notes that base did not serve a call; answered says whether it
        gave an answer (a 503) rather than none."""
        with self._mu:
            if self.leader == base:
                self.leader = ""
            self._learned = False
            self._down[base] = time.monotonic() + SUSPECT_FOR
            if answered:
                self._silent.pop(base, None)
            else:
                self._silent[base] = self._down[base]
            self._next = self.endpoints.index(base) + 1 if base in self.endpoints else self._next + 1

    def _ensure_leader(self, deadline: float | None) -> None:
        with self._mu:
            need = not self._learned or (not self.leader and time.monotonic() - self._learned_at > RELEARN_EVERY)
        if need:
            self._learn_leader(deadline)

    def _learn_leader(self, deadline: float | None) -> None:
        """Asks the endpoints for /v1/status and remembers the first leader
        named, and every member as another endpoint. An endpoint that gave
        a call no answer within SUSPECT_FOR is not asked: a dead node
        would cost a connect timeout (a hung one an attempt) again. Gives
        up quietly: calls then go to the endpoints in turn, which
        forward."""
        with self._mu:
            eps = list(self.endpoints)
            first = self._next
            now = self._learned_at = time.monotonic()
            self._learned = True
            silent = {e for e, until in self._silent.items() if now < until}
        for i in range(len(eps)):
            base = eps[(first + i) % len(eps)]
            if base in silent:
                continue
            timeout = self.policy.status_timeout
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout <= 0:
                    return
            try:
                st = Status.of(self.send(base, "GET", "/v1/status", timeout=timeout).data or {})
            except (LockdError, _TransportError):
                continue
            with self._mu:
                for m in st.members:
                    self._add_endpoint(m.http_addr)
                lb = self.scheme + "://" + st.leader_addr
                if st.leader_addr and time.monotonic() >= self._down.get(lb, 0.0):
                    self._add_endpoint(st.leader_addr)
                    self.leader = lb
                    return

    def _add_endpoint(self, hostport: str) -> None:
        if hostport:
            base = self.scheme + "://" + hostport
            if base not in self.endpoints:
                self.endpoints.append(base)
