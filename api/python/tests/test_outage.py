"""Against real 3-node clusters in an outage: a session lost with its
quorum leaves its with block at once, quietly, and a fencing check fails
over from a node that takes no connection in about the connect timeout."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

import lockd
from conftest import Cluster


@pytest.mark.parametrize("how", ["return", "SystemExit"])
def test_lost_session_leaves_its_with_block_at_once(start_cluster: Callable[..., Cluster], how: str,
                                                    caplog: pytest.LogCaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two of three nodes frozen (SIGSTOP: their ports still take
    connections, nothing answers): the session is marked lost once its
    keepalives run out, and leaving its with blocks — normally, or with
    the job's own SystemExit — sends nothing (there is nothing to give
    back: the cluster expires it) and takes well under 5 s, with no
    traceback logged."""
    c = start_cluster()
    client = lockd.Client(c.addrs)
    calls: list[str] = []
    real = client.transport.do

    def spy(method: str, path: str, **kw: Any) -> lockd._transport.Answer:
        calls.append(f"{method} {path}")
        return real(method, path, **kw)
    monkeypatch.setattr(client.transport, "do", spy)
    caplog.set_level(logging.INFO, logger="lockd")
    lost_at, sent_before = 0.0, 0
    try:
        with client.session(ttl=3, name="outage") as s:
            with s.lock("outage/x", wait=10) as g:
                frozen = c.nodes[1:]  # any two: the third cannot elect a leader alone
                for n in frozen:
                    n.signal(signal.SIGSTOP)
                frozen_at = time.monotonic()
                assert g.lost.wait(60), "the grant was not marked lost"
                lost_at, sent_before = time.monotonic(), len(calls)
                print(f"marked lost {lost_at - frozen_at:.3f}s after the freeze: {g.lost_reason}")
                if how == "SystemExit":
                    raise SystemExit(7)
    except SystemExit as e:
        assert how == "SystemExit" and e.code == 7
    took = time.monotonic() - lost_at
    print(f"left the with blocks {took:.3f}s after the session was marked lost")
    assert took < 5, f"leaving the with blocks took {took:.1f}s after the session was marked lost"
    after = [x for x in calls[sent_before:] if not x.endswith("/keepalive")]
    assert after == [], f"sent after the loss: {after}"
    assert s.state == "lost" and isinstance(s.error, lockd.SessionLost)
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert not [r.getMessage() for r in caplog.records if "clos" in r.getMessage()]


def test_check_fails_over_from_a_node_that_takes_no_connection(start_cluster: Callable[..., Cluster],
                                                                silent_addr: str) -> None:
    """The first endpoint the resource's client knows takes no connection
    (a stopped container): its check costs about the connect timeout (1s)
    there, not the status or attempt timeout (30s here), and answers from
    the cluster."""
    c = start_cluster()
    holder = lockd.Client(c.addrs)
    with holder.session(ttl=5) as s, s.lock("fence/x", wait=10) as g:
        policy = lockd.RetryPolicy(attempt_timeout=30, status_timeout=30)
        resource = lockd.Client([silent_addr, *c.addrs], retry=policy)
        start = time.monotonic()
        valid = resource.check("fence/x", g.token)
        took = time.monotonic() - start
        print(f"check with a dead first endpoint: {valid} in {took:.3f}s")
        assert valid
        assert took < policy.connect_timeout + 3, f"check took {took:.1f}s"
