"""The transport's rules without a cluster: wire formats, endpoints, and
which calls are retried when a node takes a request and answers nothing."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

import lockd
from conftest import Reply, fake_node
from lockd._transport import Retry, decode_error, normalize_endpoint
from lockd.types import format_duration, parse_duration


@pytest.mark.parametrize("text,seconds", [
    ("0s", 0.0), ("0", 0.0), ("10s", 10.0), ("250ms", 0.25), ("1m30s", 90.0), ("1h0m0s", 3600.0),
    ("1.5s", 1.5), ("2µs", 2e-6), ("100ns", 1e-7),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "10", "s", "1x", "1s2"])
def test_parse_duration_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize("seconds,text", [(0, "0s"), (10, "10s"), (0.25, "250ms"), (1.5, "1500ms"),
                                          (1e-7, "100ns"), (86400, "86400s")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("ep,tls,want", [
    ("127.0.0.1:7001", False, "http://127.0.0.1:7001"),
    ("http://127.0.0.1:7001/", False, "http://127.0.0.1:7001"),
    ("https://node1:7001", False, "https://node1:7001"),
    ("127.0.0.1:7001", True, "https://127.0.0.1:7001"),
    ("[::1]:7001", False, "http://[::1]:7001"),
])
def test_normalize_endpoint(ep: str, tls: bool, want: str) -> None:
    assert normalize_endpoint(ep, tls) == want


@pytest.mark.parametrize("bad", ["", "ftp://x:1", "http://x:1/v1", "127.0.0.1"])
def test_normalize_endpoint_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        normalize_endpoint(bad, False)


@pytest.mark.parametrize("status,body,cls,code", [
    (409, b'{"error":{"code":"timeout","message":"held by s1"}}', lockd.Timeout, "timeout"),
    (404, b'{"error":{"code":"session_not_found","message":"x"}}', lockd.SessionNotFound, "session_not_found"),
    (415, b'{"error":{"code":"invalid_request","message":"json"}}', lockd.InvalidRequest, "invalid_request"),
    (429, b'{"error":{"code":"limit_exceeded","message":"x"}}', lockd.LimitExceeded, "limit_exceeded"),
    (503, b'{"error":{"code":"no_leader","message":"x","not_applied":true}}', lockd.ClusterUnavailable,
     "no_leader"),
    (502, b"<html>bad gateway</html>", lockd.ClusterUnavailable, "no_leader"),
    (500, b"oops", lockd.InternalError, "internal"),
    (409, b'{"error":{"code":"something_new","message":"x"}}', lockd.LockdError, "something_new"),
])
def test_decode_error(status: int, body: bytes, cls: type[lockd.LockdError], code: str) -> None:
    e = decode_error(status, body)
    assert type(e) is cls and e.code == code and e.http_status == status


@pytest.fixture
def mute_node() -> Iterator[tuple[str, list[bytes]]]:
    """A TCP server that reads each request and closes without answering:
    a node that took the request and died."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    seen: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                seen.append(conn.recv(65536))
    threading.Thread(target=serve, daemon=True).start()
    yield f"127.0.0.1:{srv.getsockname()[1]}", seen
    srv.close()


def _client(addr: str) -> lockd.Client:
    return lockd.Client(addr, token="", retry=lockd.RetryPolicy(max_elapsed=0.5, min_backoff=0.01,
                                                                 max_backoff=0.05))


def test_unsafe_call_sent_without_answer_is_outcome_unknown(mute_node: tuple[str, list[bytes]]) -> None:
    addr, seen = mute_node
    with pytest.raises(lockd.OutcomeUnknown):
        _client(addr).revoke("jobs/x")
    assert sum(b.startswith(b"POST /v1/revoke") for b in seen) == 1, "an unsafe call was sent twice"


def test_safe_call_is_retried(mute_node: tuple[str, list[bytes]]) -> None:
    addr, seen = mute_node
    with pytest.raises(lockd.ClusterUnavailable):
        _client(addr).check("jobs/x", 1)
    assert sum(b.startswith(b"GET /v1/check") for b in seen) > 1


def test_unsafe_call_never_sent_is_retried() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = f"127.0.0.1:{s.getsockname()[1]}"
    s.close()  # nothing listens: every connection is refused, so nothing was sent
    c = _client(addr)
    with pytest.raises(lockd.ClusterUnavailable) as e:
        c.transport.do("POST", "/v1/release", body={}, retry=Retry.UNSENT)
    assert "attempts" in e.value.message


def test_reattach_names_the_session() -> None:
    """An acquire whose answer is lost re-attaches with GET
    /v1/requests/{id} naming its session: request ids are each session's
    own, and another session of the same token may use the same one."""
    gets: list[str] = []

    def route(method: str, path: str) -> Reply:
        url = urlsplit(path)
        if method == "POST" and url.path == "/v1/sessions":
            return 201, {"id": "s1", "ttl": "10s"}
        if method == "POST" and url.path == "/v1/acquire":  # the outcome is unknown
            return 503, {"error": {"code": "no_leader", "message": "fake"}}
        if method == "DELETE":
            return 200, {"released": []}
        if method == "GET" and url.path.startswith("/v1/requests/"):
            session = parse_qs(url.query).get("session", [""])[0]
            gets.append(session)
            if session != "s1":  # as for an id two sessions use
                return 400, {"error": {"code": "invalid_request", "message": "give the session"}}
            return 200, {"request_id": url.path.rsplit("/", 1)[1], "session": "s1", "status": "granted", "token": 3,
                         "granted": [{"name": "a", "mode": "write", "weight": 1, "token": 3}]}
        return 200, {"ttl": "10s"} if method == "POST" else {}

    with fake_node(route) as addr:
        s = _client(addr).session(10)
        g = s.lock("a", wait=5)
        assert g.token == 3
        assert gets and all(x == "s1" for x in gets), f"re-attaches named sessions {gets}"


@pytest.mark.parametrize("state,sends", [("released", 1), ("granted", 2)])
def test_release_of_unknown_outcome_is_settled(state: str, sends: int) -> None:
    """A release whose answer was lost (503 without not_applied) asks for
    the request's state: "released" means the first send took effect and
    nothing is sent again; "granted" means it did not, and it is sent once
    more. Never counted down twice, never raised as unknown."""
    releases: list[int] = []

    def route(method: str, path: str) -> Reply:
        if method == "POST" and path == "/v1/sessions":
            return 201, {"id": "s1", "ttl": "10s"}
        if method == "POST" and path == "/v1/acquire":
            return 200, {"status": "granted", "request_id": "r1", "token": 3,
                         "granted": [{"name": "a", "mode": "write", "weight": 1, "token": 3}]}
        if method == "POST" and path == "/v1/release":
            releases.append(1)
            if len(releases) == 1:  # the first answer is lost
                return 503, {"error": {"code": "no_leader", "message": "fake"}}
            return 200, {"released": [{"name": "a"}]}
        if method == "GET" and path.startswith("/v1/requests/r1"):
            return 200, {"request_id": "r1", "session": "s1", "status": state, "token": 3}
        if method == "DELETE":
            return 200, {"released": []}
        return 200, {"ttl": "10s"} if method == "POST" else {}

    with fake_node(route) as addr:
        s = _client(addr).session(10)
        g = s.lock("a", wait=5)
        s.release(g)
        assert g.released
        assert len(releases) == sends, f"release sent {len(releases)} times, want {sends}"


# ---- an outage: dead nodes, hung nodes, and what the errors say ----------

# A 503 as a node without quorum answers it.
NO_QUORUM = "no leader: 1 of 3 voters reachable (n1); a majority of 2 is needed"
NO_QUORUM_BODY = {"error": {"code": "no_leader", "message": NO_QUORUM, "not_applied": True, "quorum_lost": True}}


def test_a_leader_that_takes_no_connection_costs_a_connect_timeout(silent_addr: str) -> None:
    """The leader the cluster names takes no connection (a killed
    container): the check fails over after the policy's connect timeout
    (1s), not after the attempt timeout (30s here), and the dead node is
    not asked for the leader again while it is suspect."""
    def route(method: str, path: str) -> Reply:
        if path == "/v1/status":
            return 200, {"leader": {"id": "n9", "http_addr": silent_addr}}
        if path.startswith("/v1/check"):
            return 200, {"valid": True, "token": 7}
        return 404, {"error": {"code": "not_found", "message": path}}

    with fake_node(route) as addr:
        policy = lockd.RetryPolicy(attempt_timeout=30, status_timeout=30)
        c = lockd.Client(addr, token="", retry=policy)
        start = time.monotonic()
        assert c.check("jobs/x", 7)
        took = time.monotonic() - start
    print(f"check failed over from a node that takes no connection in {took:.3f}s")
    assert took < policy.connect_timeout + 3, f"check took {took:.1f}s"


def test_check_timeout_bounds_the_call(silent_addr: str) -> None:
    """check(timeout=) bounds the whole call, failovers included: with no
    node taking a connection, ClusterUnavailable comes at the bound."""
    c = lockd.Client(silent_addr, token="",
                     retry=lockd.RetryPolicy(attempt_timeout=30, status_timeout=30, max_elapsed=0))
    start = time.monotonic()
    with pytest.raises(lockd.ClusterUnavailable) as e:
        c.check("jobs/x", 7, timeout=0.5)
    took = time.monotonic() - start
    print(f"check(timeout=0.5) with no node reachable: {e.value} after {took:.3f}s")
    assert took < 3, f"check(timeout=0.5) took {took:.1f}s"
    assert "no connection within" in e.value.message


def test_giving_up_names_the_last_answer() -> None:
    """A call whose retries run out says what the cluster last answered
    (a 503 without quorum: its code, message and quorum_lost), not only
    that the last node tried gave no answer."""
    checks: list[int] = []

    def route(method: str, path: str) -> Reply:
        if path == "/v1/status":
            return 200, {}
        checks.append(1)
        return (503, NO_QUORUM_BODY) if len(checks) == 1 else None  # then: no answer at all

    with fake_node(route) as addr:
        with pytest.raises(lockd.ClusterUnavailable) as e:
            _client(addr).check("jobs/x", 1)
    assert len(checks) > 1, "the call gave up after the 503 without trying again"
    err = e.value
    assert NO_QUORUM in err.message and err.quorum_lost and err.http_status == 503, str(err)
    assert "giving up after" in err.message and "last failure" in err.message, str(err)


def test_lost_session_names_the_last_answer() -> None:
    """A session whose keepalives ran out names the cluster's last answer
    (its cause, too), though later keepalives got no answer at all."""
    keepalives: list[int] = []

    def route(method: str, path: str) -> Reply:
        if path == "/v1/sessions":
            return 201, {"id": "s1", "ttl": "2s"}
        if path.endswith("/keepalive"):
            keepalives.append(1)
            return (503, NO_QUORUM_BODY) if len(keepalives) == 1 else None
        return 200, {}

    with fake_node(route) as addr:
        s = _client(addr).session(ttl=2)
        assert s.lost.wait(15), "the session was not reported lost"
        s.close()
    err = s.error
    assert isinstance(err, lockd.SessionLost) and s.state == "lost"
    assert NO_QUORUM in str(err), str(err)
    assert isinstance(err.__cause__, lockd.ClusterUnavailable) and err.__cause__.quorum_lost, repr(err.__cause__)
    assert len(keepalives) > 1


def hung_cluster(hang: threading.Event, release: threading.Event) -> Callable[[str, str], Reply]:
    """A fake node with one session "hung-1", which gets lock "a" when it
    asks, that once hang is set holds every request until release is set
    and then closes it unanswered: a frozen node, whose port still takes
    connections."""
    def route(method: str, path: str) -> Reply:
        if hang.is_set():
            release.wait(60)
            return None
        if path == "/v1/sessions":
            return 201, {"id": "hung-1", "ttl": "30s"}
        if path == "/v1/acquire":
            return 200, {"status": "granted", "request_id": "r1", "token": 3,
                         "granted": [{"name": "a", "mode": "write", "weight": 1, "token": 3}]}
        return 200, {}
    return route


@pytest.mark.parametrize("raise_exit", [False, True], ids=["return", "SystemExit"])
def test_session_exit_is_bounded_when_the_cluster_hangs(raise_exit: bool, caplog: pytest.LogCaptureFixture) -> None:
    """Leaving a session's with block while no node answers: the close
    gives up after close_timeout with one warning line (no traceback).
    With the job's own SystemExit in flight, the grant's release on the
    way out is bounded the same way, and the SystemExit goes through
    unchanged."""
    hang, release = threading.Event(), threading.Event()
    with fake_node(hung_cluster(hang, release)) as addr:
        c = lockd.Client(addr, token="", close_timeout=0.5,
                         retry=lockd.RetryPolicy(attempt_timeout=30, status_timeout=30))
        s = c.session(ttl=30)
        caplog.set_level(logging.INFO, logger="lockd")
        start = 0.0
        try:
            with s:
                if raise_exit:
                    with s.lock("a", wait=5):
                        hang.set()
                        start = time.monotonic()
                        raise SystemExit(3)
                hang.set()
                start = time.monotonic()
        except SystemExit as e:
            assert raise_exit and e.code == 3
        took = time.monotonic() - start
        release.set()
    print(f"left the with blocks in {took:.3f}s (close_timeout 0.5s)")
    assert took < 5, f"leaving the with blocks took {took:.1f}s"
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    # (Sessions of the other tests' fake nodes may log their loss meanwhile.)
    records = [r for r in caplog.records if "hung-1" in r.getMessage() or "Grant" in r.getMessage()]
    want = ["releasing", "not closed"] if raise_exit else ["not closed"]
    assert [r.levelno for r in records] == [logging.WARNING] * len(want), [r.getMessage() for r in records]
    assert all(w in r.getMessage() for w, r in zip(want, records)), [r.getMessage() for r in records]
    assert s.state == "closed"


def test_explicit_close_is_bounded_by_its_timeout() -> None:
    """s.close(timeout=) raises, as close does, but at its bound."""
    hang, release = threading.Event(), threading.Event()
    with fake_node(hung_cluster(hang, release)) as addr:
        c = lockd.Client(addr, token="", retry=lockd.RetryPolicy(attempt_timeout=30, status_timeout=30))
        s = c.session(ttl=30)
        hang.set()
        start = time.monotonic()
        with pytest.raises(lockd.ClusterUnavailable):
            s.close(timeout=0.5)
        took = time.monotonic() - start
        release.set()
    print(f"close(timeout=0.5) gave up in {took:.3f}s")
    assert took < 5, f"close(timeout=0.5) took {took:.1f}s"
