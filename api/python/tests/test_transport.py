"""The transport's rules without a cluster: wire formats, endpoints, and
which calls are retried when a node takes a request and answers nothing."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import lockd
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

    class FakeNode(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == "/v1/sessions":
                self.answer(201, {"id": "s1", "ttl": "10s"})
            elif self.path == "/v1/acquire":  # the outcome is unknown
                self.answer(503, {"error": {"code": "no_leader", "message": "fake"}})
            else:
                self.answer(200, {"ttl": "10s"})

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if not url.path.startswith("/v1/requests/"):
                self.answer(200, {})
                return
            session = parse_qs(url.query).get("session", [""])[0]
            gets.append(session)
            if session != "s1":  # as for an id two sessions use
                self.answer(400, {"error": {"code": "invalid_request", "message": "give the session"}})
                return
            self.answer(200, {"request_id": url.path.rsplit("/", 1)[1], "session": "s1", "status": "granted", "token": 3,
                              "granted": [{"name": "a", "mode": "write", "weight": 1, "token": 3}]})

        def do_DELETE(self) -> None:
            self.answer(200, {"released": []})

    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeNode)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        s = _client(f"127.0.0.1:{srv.server_address[1]}").session(10)
        g = s.lock("a", wait=5)
        assert g.token == 3
        assert gets and all(x == "s1" for x in gets), f"re-attaches named sessions {gets}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("state,sends", [("released", 1), ("granted", 2)])
def test_release_of_unknown_outcome_is_settled(state: str, sends: int) -> None:
    """A release whose answer was lost (503 without not_applied) asks for
    the request's state: "released" means the first send took effect and
    nothing is sent again; "granted" means it did not, and it is sent once
    more. Never counted down twice, never raised as unknown."""
    releases: list[int] = []

    class FakeNode(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == "/v1/sessions":
                self.answer(201, {"id": "s1", "ttl": "10s"})
            elif self.path == "/v1/acquire":
                self.answer(200, {"status": "granted", "request_id": "r1", "token": 3,
                                  "granted": [{"name": "a", "mode": "write", "weight": 1, "token": 3}]})
            elif self.path == "/v1/release":
                releases.append(1)
                if len(releases) == 1:  # the first answer is lost
                    self.answer(503, {"error": {"code": "no_leader", "message": "fake"}})
                else:
                    self.answer(200, {"released": [{"name": "a"}]})
            else:
                self.answer(200, {"ttl": "10s"})

        def do_GET(self) -> None:
            if self.path.startswith("/v1/requests/r1"):
                self.answer(200, {"request_id": "r1", "session": "s1", "status": state, "token": 3})
            else:
                self.answer(200, {})

        def do_DELETE(self) -> None:
            self.answer(200, {"released": []})

    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeNode)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        s = _client(f"127.0.0.1:{srv.server_address[1]}").session(10)
        g = s.lock("a", wait=5)
        s.release(g)
        assert g.released
        assert len(releases) == sends, f"release sent {len(releases)} times, want {sends}"
    finally:
        srv.shutdown()
        srv.server_close()
