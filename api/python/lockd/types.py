"""Values the lockd API sends and receives, as dataclasses.

Durations are seconds (``float``) on the Python side and Go duration
strings (``"10s"``, ``"250ms"``) on the wire.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

#: A lock mode: ``"write"`` (exclusive) or ``"read"`` (shared).
Mode = Literal["write", "read"]

#: How many of a multi-lock request's locks must be granted, atomically.
Require = Literal["all", "any", "majority"]

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Parses a Go duration string (``"1m30s"``, ``"250ms"``) into seconds."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    total, pos = 0.0, 0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"not a Go duration string: {text!r}")
    return sign * total


def format_duration(seconds: float) -> str:
    """Formats seconds as a Go duration string the server parses exactly."""
    if seconds < 0:
        raise ValueError(f"negative duration {seconds}")
    ns = round(seconds * 1e9)
    if ns % 1_000_000_000 == 0:
        return f"{ns // 1_000_000_000}s"
    if ns % 1_000_000 == 0:
        return f"{ns // 1_000_000}ms"
    return f"{ns}ns"


@dataclass(frozen=True)
class LockSpec:
    """One lock named in an acquire.

    ``weight`` is the permits taken of a semaphore (write only); ``limit``
    makes the name a semaphore of that many permits (``None``: whatever the
    name is, 1 for a new name). Every user of a name must agree on its limit.
    ``value`` is what the hold says about its holder (UTF-8 text of at most
    4096 bytes, such as a leader's address), shown with it in every view;
    ``""`` gives none, so that a reentrant acquire keeps the hold's value.
    """

    name: str
    mode: Mode = "write"
    weight: int = 1
    limit: int | None = None
    value: str = ""

    def wire(self) -> dict[str, Any]:
        """The JSON object of this spec."""
        d: dict[str, Any] = {"name": self.name, "mode": self.mode}
        if self.weight != 1:
            d["weight"] = self.weight
        if self.limit is not None:
            d["limit"] = self.limit
        if self.value:
            d["value"] = self.value
        return d


@dataclass(frozen=True)
class GrantedLock:
    """One lock of a grant, with its fencing token."""

    name: str
    mode: str
    weight: int
    token: int

    @classmethod
    def of(cls, d: dict[str, Any]) -> GrantedLock:
        """Decodes the API's JSON object."""
        return cls(name=d["name"], mode=d.get("mode", "write"), weight=d.get("weight", 1), token=d.get("token", 0))


@dataclass(frozen=True)
class Holder:
    """One hold on a lock. ``session`` is empty for a session of another
    token (with ACLs, only a management token sees every id); ``value``,
    what the holder says about itself, is shown to every token that may
    read the name."""

    session: str
    mode: str
    weight: int
    count: int
    token: int
    since: str = ""  # RFC 3339: when it was granted ("" once lockd's log no longer holds that entry)
    value: str = ""


@dataclass(frozen=True)
class Waiter:
    """One queued request on a lock, in arrival order. ``session`` is
    empty for a session of another token."""

    session: str
    request_id: str
    mode: str
    weight: int
    since: str = ""  # RFC 3339: when it was queued
    value: str = ""  # the value it gives the hold once granted (a candidate's)


@dataclass(frozen=True)
class LockInfo:
    """One name's queue: its version, semaphore limit, holders and waiters."""

    name: str
    version: int
    limit: int
    holders: list[Holder] = field(default_factory=list)
    waiters: list[Waiter] = field(default_factory=list)

    @classmethod
    def of(cls, d: dict[str, Any]) -> LockInfo:
        """Decodes the API's JSON object."""
        return cls(
            name=d["name"], version=d.get("version", 0), limit=d.get("limit", 1),
            holders=[Holder(h["session"], h.get("mode", "write"), h.get("weight", 1), h.get("count", 1),
                            h.get("token", 0), h.get("since", ""), h.get("value", ""))
                     for h in d.get("holders") or []],
            waiters=[Waiter(w["session"], w.get("request_id", ""), w.get("mode", "write"), w.get("weight", 1),
                            w.get("since", ""), w.get("value", "")) for w in d.get("waiters") or []],
        )


@dataclass(frozen=True)
class Leader:
    """The leader of a name read as an election (``GET
    /v1/elections/{name}``): of the name's holders, the one granted first.
    ``token`` is the fencing token of its hold, the term of its
    leadership (a later leader always has a larger one); ``value`` is what
    it proclaimed; ``since`` (RFC 3339) when its hold was granted (""
    once lockd's log no longer holds that entry)."""

    value: str
    token: int
    since: str = ""

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> Leader | None:
        """Decodes the API's ``leader`` object (None: nobody leads)."""
        if not d:
            return None
        return cls(value=d.get("value", ""), token=d.get("token", 0), since=d.get("since", ""))


@dataclass(frozen=True)
class Member:
    """One node of the cluster."""

    id: str
    http_addr: str
    raft_addr: str
    voter: bool
    status: str


@dataclass(frozen=True)
class Status:
    """One node's view of the cluster (``GET /v1/status``)."""

    node_id: str
    state: str
    leader_id: str
    leader_addr: str
    term: int
    commit_index: int
    applied_index: int
    members: list[Member]
    #: True when this node reaches fewer voters than a majority and follows
    #: no leader: writes and linearizable reads on it answer 503 at once.
    quorum_lost: bool = False
    #: The voters this node's raft reaches (ids), and how many a majority is.
    reachable: tuple[str, ...] = ()
    needed: int = 0
    #: Where the node keeps raft's log: "wal" or "bolt".
    log_store: str = ""

    @classmethod
    def of(cls, d: dict[str, Any]) -> Status:
        """Decodes the API's JSON object."""
        leader = d.get("leader") or {}
        quorum = d.get("quorum") or {}
        return cls(
            node_id=d.get("node_id", ""), state=d.get("state", ""), leader_id=leader.get("id", ""),
            leader_addr=leader.get("http_addr", ""), term=d.get("term", 0),
            commit_index=d.get("commit_index", 0), applied_index=d.get("applied_index", 0),
            members=[Member(m.get("id", ""), m.get("http_addr", ""), m.get("raft_addr", ""),
                            bool(m.get("voter")), m.get("status", "")) for m in d.get("members") or []],
            quorum_lost=bool(d.get("quorum_lost")), reachable=tuple(quorum.get("reachable") or ()),
            needed=quorum.get("needed", 0), log_store=d.get("log_store", ""),
        )


@dataclass(frozen=True)
class Revocation:
    """One hold an operator revoked from a session."""

    name: str
    token: int
    index: int


@dataclass(frozen=True)
class HeldLock:
    """One hold of a session, with its value."""

    name: str
    mode: str
    weight: int
    count: int
    token: int
    value: str = ""


@dataclass(frozen=True)
class SessionInfo:
    """A session as the cluster sees it."""

    id: str
    name: str
    ttl: float
    on_deadlock: str
    ordered: bool
    lock_delay: float
    held: list[HeldLock]
    pending: list[str]
    revoked: list[Revocation]
    since: str = ""  # RFC 3339: when it was created

    @classmethod
    def of(cls, d: dict[str, Any]) -> SessionInfo:
        """Decodes the API's JSON object."""
        return cls(
            id=d["id"], name=d.get("name", ""), ttl=parse_duration(d.get("ttl", "0s")),
            on_deadlock=d.get("on_deadlock", "abort"), ordered=bool(d.get("ordered")),
            lock_delay=parse_duration(d.get("lock_delay", "0s")),
            held=[HeldLock(h["name"], h.get("mode", "write"), h.get("weight", 1), h.get("count", 1),
                           h.get("token", 0), h.get("value", "")) for h in d.get("held") or []],
            pending=list(d.get("pending") or []),
            revoked=[Revocation(r["name"], r.get("token", 0), r.get("index", 0)) for r in d.get("revoked") or []],
            since=d.get("since", ""),
        )


@dataclass(frozen=True)
class RevokedHold:
    """One hold a revoke released."""

    session: str
    name: str
    token: int


@dataclass(frozen=True)
class Rule:
    """Gives ``access`` (``"read"``, ``"write"`` or ``"admin"``) to the
    names that start with ``prefix``."""

    prefix: str
    access: str


@dataclass(frozen=True)
class Token:
    """An ACL token; ``secret`` is set only in the answer that made it."""

    id: str
    name: str
    rules: list[Rule]
    secret: str = ""

    @classmethod
    def of(cls, d: dict[str, Any]) -> Token:
        """Decodes the API's JSON object."""
        return cls(id=d["id"], name=d.get("name", ""), secret=d.get("secret", ""),
                   rules=[Rule(r.get("prefix", ""), r.get("access", "")) for r in d.get("rules") or []])
