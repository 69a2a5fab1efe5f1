"""Locks, modes, semaphores, multi-locks, hold TTL, try-lock, surrender,
check, observing and bad input, against a real dev node."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import lockd
from conftest import Cluster, eventually


@pytest.fixture
def two(client: lockd.Client) -> Iterator[tuple[lockd.Session, lockd.Session]]:
    with client.session(ttl=10, name="a") as a, client.session(ttl=10, name="b") as b:
        yield a, b


def test_lock_token_check_release(client: lockd.Client) -> None:
    with client.session(ttl=10, name="nightly-backup") as s:
        with s.lock("jobs/backup", wait=10) as g:
            assert g.token > 0 and g.names() == ["jobs/backup"]
            assert client.check("jobs/backup", g.token)
            assert client.check("jobs/backup/part-1", g.token)  # a lock covers the names below it
            assert not client.check("jobs/backup", g.token - 1)
        assert not client.check("jobs/backup", g.token)
        assert not g.lost.is_set()
        with s.lock("jobs/backup") as g2:
            assert g2.token > g.token


def test_release_on_exception(client: lockd.Client, two: tuple[lockd.Session, lockd.Session]) -> None:
    a, b = two
    with pytest.raises(RuntimeError):
        with a.lock("exc/x"):
            raise RuntimeError("job failed")
    b.try_lock("exc/x").release()


def test_try_lock_twice_does_not_spin_or_queue(client: lockd.Client,
                                               two: tuple[lockd.Session, lockd.Session]) -> None:
    """A second non-blocking acquire answers Locked again and leaves no
    waiter behind (kazoo#315)."""
    a, b = two
    held = a.lock("try/x")
    for _ in range(2):
        with pytest.raises(lockd.Locked) as ei:
            b.try_lock("try/x")
        assert ei.value.http_status == 409 and a.id in ei.value.message
    info = client.get_lock("try/x")
    assert info is not None and info.waiters == [] and [h.session for h in info.holders] == [a.id]
    # when the hold and the session began, on the leader's clock
    assert info.holders[0].since and client.get_session(a.id).since
    held.release()
    b.try_lock("try/x").release()


def test_wait_is_honoured(client: lockd.Client, two: tuple[lockd.Session, lockd.Session]) -> None:
    """`with lock(wait=1)` on a held lock raises Timeout after about a second
    and leaves nothing queued (python-etcd3#599: the context manager waited
    10 s whatever was asked)."""
    a, b = two
    a.lock("wait/x")
    start = time.monotonic()
    with pytest.raises(lockd.Timeout):
        with b.lock("wait/x", wait=1):
            raise AssertionError("granted while another session holds it")
    assert time.monotonic() - start < 30  # generous: the bug waits for ever
    info = client.get_lock("wait/x")
    assert info is not None and info.waiters == []


def test_waiter_granted_on_release(two: tuple[lockd.Session, lockd.Session]) -> None:
    a, b = two
    g = a.lock("handoff/x")
    got: list[lockd.Grant] = []
    t = threading.Thread(target=lambda: got.append(b.lock("handoff/x", wait=30)))
    t.start()
    eventually(lambda: (i := b.client.get_lock("handoff/x")) and i.waiters, "b waits")
    g.release()
    t.join(30)
    assert got and got[0].token > g.token


def test_modes(two: tuple[lockd.Session, lockd.Session]) -> None:
    a, b = two
    ra, rb = a.rlock("mode/x"), b.rlock("mode/x")
    assert {ra.locks[0].mode, rb.locks[0].mode} == {"read"}
    with pytest.raises(lockd.Locked):
        a.try_lock("mode/x/child")  # a write below a read-held name
    ra.release()
    rb.release()
    with a.lock("mode/x"):
        with pytest.raises(lockd.Locked):
            b.rlock("mode/x", wait=0)


def test_semaphore_limits_and_weights(client: lockd.Client) -> None:
    sessions = [client.session(ttl=10) for _ in range(4)]
    try:
        granted, refused = [], 0
        for s in sessions:
            try:
                granted.append(s.semaphore("pool/gpu", limit=2, wait=0))
            except lockd.Locked:
                refused += 1
        assert len(granted) == 2 and refused == 2
        info = client.get_lock("pool/gpu")
        assert info is not None and info.limit == 2 and len(info.holders) == 2
        with pytest.raises(lockd.LimitMismatch):
            sessions[3].semaphore("pool/gpu", limit=3, wait=0)
        granted[0].release()
        granted.append(sessions[2].semaphore("pool/gpu", limit=2, wait=0))
        # weights: 2 of 3 permits leave 1
        w = sessions[0].semaphore("pool/w", limit=3, weight=2, wait=0)
        with pytest.raises(lockd.Locked):
            sessions[1].semaphore("pool/w", limit=3, weight=2, wait=0)
        sessions[1].semaphore("pool/w", limit=3, weight=1, wait=0)
        assert w.locks[0].weight == 2
    finally:
        for s in sessions:
            s.close()


@pytest.mark.parametrize("require,taken,want", [
    ("all", [], ["multi/a", "multi/b", "multi/c"]),
    ("any", ["multi/a", "multi/b"], ["multi/c"]),
    ("majority", ["multi/a"], ["multi/b", "multi/c"]),
])
def test_multi_lock(client: lockd.Client, two: tuple[lockd.Session, lockd.Session], require: lockd.Require,
                    taken: list[str], want: list[str]) -> None:
    a, b = two
    held = [a.lock(n) for n in taken]
    g = b.acquire(["multi/a", "multi/b", lockd.LockSpec("multi/c")], require=require, wait=5)
    assert sorted(g.names()) == want
    assert all(client.check(n, g.token_for(n)) for n in want)
    g.release()
    for h in held:
        h.release()


def test_multi_lock_all_is_atomic(two: tuple[lockd.Session, lockd.Session]) -> None:
    a, b = two
    a.lock("atomic/b")
    with pytest.raises(lockd.Locked):
        b.acquire(["atomic/a", "atomic/b"], wait=0)
    b.try_lock("atomic/a").release()  # nothing of the failed request is held


def test_hold_ttl(client: lockd.Client, two: tuple[lockd.Session, lockd.Session]) -> None:
    a, _ = two
    g = a.lock("ttl/x", hold_ttl=1)
    assert g.deadline is not None and g.deadline > time.monotonic() - 1
    eventually(lambda: not client.check("ttl/x", g.token), "the hold ends by itself")


def test_surrender(client: lockd.Client, two: tuple[lockd.Session, lockd.Session]) -> None:
    a, b = two
    g = a.lock("surr/x")
    assert a.surrender("surr/x") is False  # nobody waits: kept
    got: list[lockd.Grant] = []
    t = threading.Thread(target=lambda: got.append(b.lock("surr/x", wait=30)))
    t.start()
    eventually(lambda: (i := client.get_lock("surr/x")) and i.waiters, "b waits")
    assert a.surrender("surr/x") is True
    t.join(30)
    assert got and client.check("surr/x", got[0].token) and not client.check("surr/x", g.token)
    with pytest.raises(lockd.NotHeld):
        a.surrender("surr/never")


def test_reentrant_unlock(two: tuple[lockd.Session, lockd.Session]) -> None:
    a, b = two
    a.lock("re/x")
    a.lock("re/x")
    a.unlock("re/x")
    with pytest.raises(lockd.Locked):
        b.try_lock("re/x")  # still held once
    a.unlock("re/x")
    b.try_lock("re/x").release()
    with pytest.raises(lockd.NotHeld):
        a.unlock("re/x")


def test_locks_watch_events(client: lockd.Client, two: tuple[lockd.Session, lockd.Session]) -> None:
    a, b = two
    a.lock("obs/one")
    a.rlock("obs/two")
    names = [i.name for i in client.locks("obs/")]
    assert names == ["obs/one", "obs/two"]
    w = client.watch("obs/three", wait=5)
    assert next(w) is None  # nobody uses it yet
    threading.Timer(0.3, lambda: b.lock("obs/three")).start()
    info = next(w)
    assert info is not None and [h.session for h in info.holders] == [b.id]
    ev = client.events()
    first = next(ev)
    threading.Timer(0.3, lambda: a.lock("obs/four")).start()
    assert next(ev) > first


def test_revoke_sets_lost(client: lockd.Client) -> None:
    lost_calls: list[tuple[str, int, lockd.LockdError]] = []
    with client.session(ttl=3, on_lost=lambda n, t, e: lost_calls.append((n, t, e))) as s:
        with s.lock("rev/x") as g:
            keep = s.lock("rev/y")
            revoked = client.revoke("rev/x")
            assert [(r.session, r.token) for r in revoked] == [(s.id, g.token)]
            assert g.lost.wait(10), "lost not set after a revoke"
            assert isinstance(g.lost_reason, lockd.Revoked)
            assert not client.check("rev/x", g.token)
        assert not keep.lost.is_set() and client.check("rev/y", keep.token)
        eventually(lambda: lost_calls, "on_lost called")
        assert lost_calls[0][:2] == ("rev/x", g.token)
        assert s.state == "alive"


def test_bad_input(client: lockd.Client) -> None:
    with pytest.raises(lockd.InvalidRequest) as ei:
        client.call("POST", "/v1/release", body=b'{"session":"x","name":"a"}', content_type="text/plain")
    assert ei.value.http_status == 415 and "application/json" in ei.value.message
    with pytest.raises(lockd.SessionNotFound) as nf:
        client.get_session("no-such-session")
    assert nf.value.http_status == 404
    with client.session(ttl=5) as s:
        with pytest.raises(lockd.InvalidRequest) as bad:
            s.lock("a//b", wait=0)
        assert "empty segment" in bad.value.message
    with pytest.raises(lockd.InvalidRequest):
        client.session(ttl=100000)
    with pytest.raises(ValueError):
        client.session(ttl=1, safety_margin=1)


def test_session_deleted_elsewhere_is_lost(client: lockd.Client) -> None:
    """A session the cluster forgets: the next call says SessionNotFound
    (404), and the session and its grants are lost."""
    s = client.session(ttl=3)
    g = s.lock("gone/x")
    client.call("DELETE", f"/v1/sessions/{s.id}")
    with pytest.raises(lockd.SessionNotFound):
        s.lock("gone/y", wait=0)
    assert s.lost.is_set() and s.state == "lost" and g.lost.is_set()
    with pytest.raises(lockd.SessionLost):
        s.lock("gone/z")
    s.close()


def test_keepalive_learns_session_gone(client: lockd.Client) -> None:
    states: list[str] = []
    s = client.session(ttl=2)
    s.add_listener(lambda st, err: states.append(st))
    g = s.lock("gone2/x")
    client.call("DELETE", f"/v1/sessions/{s.id}")
    assert s.lost.wait(10), "the keepalive did not notice the session is gone"
    eventually(lambda: states, "the listener hears of it")
    assert states == ["lost"] and isinstance(g.lost_reason, lockd.SessionLost)
    assert isinstance(s.error, lockd.SessionLost) and isinstance(s.error.__cause__, lockd.SessionNotFound)
    s.close()


def test_keepalive_thread_cannot_die_silently(client: lockd.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected exception in the keepalive thread ends the session in
    state "error" with the exception, sets lost, and loses the grants
    (jetcd#965, etcd3-py#121: the thread died and nobody knew)."""
    s = client.session(ttl=1.5)
    g = s.lock("ka/x")
    real = client.transport.do

    def broken(method: str, path: str, **kw: Any) -> Any:
        if path.endswith("/keepalive"):
            raise MemoryError("simulated")
        return real(method, path, **kw)
    monkeypatch.setattr(client.transport, "do", broken)
    assert s.lost.wait(10)
    assert s.state == "error" and isinstance(s.error, lockd.KeepaliveError)
    assert isinstance(s.error.__cause__, MemoryError)
    assert g.lost.is_set()
    monkeypatch.undo()
    s.close()  # still deletes it on the server
    assert not client.check("ka/x", g.token)


def test_suspended_then_lost_when_the_node_dies(start_dev: Callable[..., Cluster]) -> None:
    """The session says "suspended" while keepalives fail and "lost" once
    the TTL minus the margin has passed (kazoo#565: no signal at all)."""
    node = start_dev()
    c = lockd.Client(node.addrs, retry=lockd.RetryPolicy(max_elapsed=2))
    states: list[str] = []
    s = c.session(ttl=2)
    s.add_listener(lambda st, err: states.append(st))
    g = s.lock("dies/x")
    node.nodes[0].kill()
    assert s.lost.wait(15)
    eventually(lambda: "lost" in states, "the listener hears of it")
    # A keepalive that timed out under load before the kill adds
    # "suspended", "alive" in front: what the death must end with is
    # suspended, then lost, once.
    assert states[-2:] == ["suspended", "lost"] and states.count("lost") == 1, states
    assert g.lost.is_set() and isinstance(g.lost_reason, lockd.SessionLost)
    with pytest.raises(lockd.ClusterUnavailable):
        s.close()  # the session may still exist somewhere: close says it could not delete it

