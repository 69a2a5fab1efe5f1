"""Keepalives gathered into batches: one request keeps many sessions."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import lockd
from conftest import Reply, fake_node
from lockd._keeper import Keeper


def test_sessions_kept_alive_together(client: lockd.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """40 sessions live through two TTLs on far fewer requests than
    keepalives; one deleted behind the client's back is lost alone, with
    SessionNotFound as its cause."""
    ttl = 3.0
    batches: list[int] = []
    singles: list[str] = []
    real = client.transport.do

    def spy(method: str, path: str, **kw: Any) -> Any:
        if path == "/v1/sessions/keepalive":
            batches.append(len(kw["body"]["sessions"]))
        elif path.endswith("/keepalive"):
            singles.append(path)
        return real(method, path, **kw)
    monkeypatch.setattr(client.transport, "do", spy)
    with ThreadPoolExecutor(8) as pool:
        sessions = list(pool.map(lambda _: client.session(ttl=ttl), range(40)))
    try:
        gone = sessions[0]
        client.transport.do("DELETE", f"/v1/sessions/{gone.id}")
        assert gone.lost.wait(2 * ttl), "a session deleted on the server was not reported lost"
        assert isinstance(gone.error, lockd.SessionLost) and isinstance(gone.error.__cause__, lockd.SessionNotFound)
        end = time.monotonic() + 2 * ttl
        while time.monotonic() < end:
            assert all(s.state == "alive" for s in sessions[1:]), [s for s in sessions[1:] if s.state != "alive"]
            time.sleep(ttl / 10)
        live = {s.id for s in sessions[1:]}
        assert live <= {i.id for i in client.sessions()}
        sent, requests = sum(batches) + len(singles), len(batches) + len(singles)
        print(f"{sent} keepalives in {requests} requests, largest batch {max(batches, default=0)}")
        assert max(batches, default=0) >= 2 and requests * 2 <= sent, (batches, len(singles))
    finally:
        for s in sessions[1:]:
            s.close()


def test_an_older_node_gets_each_session_alone() -> None:
    """A node without the batched call (404 not_found) gets each session's
    own keepalive; a batch answers each session as its own call would."""
    calls: list[str] = []

    def route(method: str, path: str) -> Reply:
        calls.append(path)
        if path == "/v1/status":
            return 200, {}
        if path == "/v1/sessions/gone/keepalive":
            return 404, {"error": {"code": "session_not_found", "message": "fake"}}
        if path.endswith("/keepalive") and path != "/v1/sessions/keepalive":
            return 200, {"id": path.split("/")[3], "ttl": "10s", "revoked": []}
        return 404, {"error": {"code": "not_found", "message": "no endpoint"}}
    with fake_node(route) as addr:
        k = Keeper(lockd.Client([addr], token="").transport)
        deadline = time.monotonic() + 10
        with ThreadPoolExecutor(2) as pool:
            # A long pause: both wait up to 0.5 s, so they go together.
            live = pool.submit(k.keep_alive, "live", pause=60, attempt=1, deadline=deadline)
            gone = pool.submit(k.keep_alive, "gone", pause=60, attempt=1, deadline=deadline)
            assert live.result()["ttl"] == "10s"
            with pytest.raises(lockd.SessionNotFound) as e:
                gone.result()
            assert e.value.http_status == 404
    assert calls.count("/v1/sessions/keepalive") == 1, calls
    assert {"/v1/sessions/live/keepalive", "/v1/sessions/gone/keepalive"} <= set(calls), calls


def test_retry_after_is_honoured() -> None:
    """A node that turns a call away for load (503 with Retry-After) gets
    the retry no sooner than it asked."""
    asked: list[float] = []

    def route(method: str, path: str) -> Reply:
        if not path.startswith("/v1/check"):
            return 200, {}
        asked.append(time.monotonic())
        if len(asked) == 1:
            return 503, {"error": {"code": "no_leader", "message": "busy", "not_applied": True}}, {"Retry-After": "1"}
        return 200, {"valid": True, "token": 7}
    with fake_node(route) as addr:
        assert lockd.Client([addr], token="").check("jobs/x", 7)
    assert len(asked) == 2 and asked[1] - asked[0] >= 1.0, asked
