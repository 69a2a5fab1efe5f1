"""Leader election against real 3-node clusters: campaign, leader,
observe, proclaim and resign; values in the lock views; an observer
across a raft leader change; the runnable example."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

import pytest

import lockd
from conftest import PACKAGE, Cluster, Reply, eventually, fake_node


@pytest.fixture
def client(cluster: Cluster) -> lockd.Client:
    return lockd.Client(cluster.addrs)


class Background:
    """A call on a thread of its own (a candidate that waits to be
    elected), its outcome collected."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.out: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue()

        def run() -> None:
            try:
                self.out.put((fn(), None))
            except BaseException as e:  # noqa: BLE001 - handed to the test
                self.out.put((None, e))
        threading.Thread(target=run, daemon=True).start()

    def result(self, timeout: float = 60) -> Any:
        value, err = self.out.get(timeout=timeout)
        if err is not None:
            raise err
        return value


def queued(client: lockd.Client, name: str, session: lockd.Session) -> bool:
    info = client.get_lock(name)
    return info is not None and session.id in [w.session for w in info.waiters]


def test_first_candidate_leads_second_queues(client: lockd.Client) -> None:
    name = "el/two"
    with client.session(ttl=10, name="a") as a, client.session(ttl=10, name="b") as b:
        with a.campaign(name, "10.0.0.7:8080") as lead_a:
            assert (lead_a.name, lead_a.value, lead_a.token > 0) == (name, "10.0.0.7:8080", True)
            second = Background(lambda: b.campaign(name, "10.0.0.8:8080", wait=60))
            eventually(lambda: queued(client, name, b), "b queues as a candidate")
            leader = client.leader(name)
            assert leader is not None and (leader.value, leader.token) == ("10.0.0.7:8080", lead_a.token)
            assert leader.since
            info = client.get_lock(name)
            assert info is not None and [(h.session, h.value) for h in info.holders] == [(a.id, "10.0.0.7:8080")]
            assert [(w.session, w.value) for w in info.waiters] == [(b.id, "10.0.0.8:8080")]
            assert [(h.name, h.value) for h in a.info().held] == [(name, "10.0.0.7:8080")]
        # Leaving the with block resigned: b is elected, with a larger token.
        lead_b: lockd.Leadership = second.result()
        with lead_b:
            assert lead_b.token > lead_a.token and not lead_a.lost.is_set()
            leader = client.leader(name)
            assert leader is not None and (leader.value, leader.token) == ("10.0.0.8:8080", lead_b.token)
        assert client.leader(name) is None


def test_observe_sees_proclaim_then_successor(client: lockd.Client) -> None:
    """The observer yields A, A's proclaimed value under the same token,
    then B with a larger token once A resigns; "nobody leads" is not
    yielded, the next leader is."""
    name = "el/observe"
    with client.session(ttl=10, name="a") as a, client.session(ttl=10, name="b") as b:
        lead_a = a.campaign(name, "A")
        second = Background(lambda: b.campaign(name, "B", wait=60))
        eventually(lambda: queued(client, name, b), "b queues as a candidate")
        obs = client.observe(name, timeout=120)
        assert next(obs) == client.leader(name) == lockd.Leader("A", lead_a.token, client.leader(name).since)
        # The observer blocks until the proclaim wakes it.
        proclaim = threading.Timer(0.3, lambda: lead_a.proclaim("A2"))
        proclaim.start()
        got = next(obs)
        proclaim.join()
        assert (got.value, got.token) == ("A2", lead_a.token) and lead_a.value == "A2"
        lead_a.proclaim("A2")  # the same value again: no change, nothing yielded for it
        lead_a.resign()
        lead_b = second.result()
        got = next(obs)
        assert (got.value, got.token) == ("B", lead_b.token) and lead_b.token > lead_a.token
        lead_b.resign()  # nobody leads: not yielded
        assert client.leader(name) is None
        with a.campaign(name, "A3") as lead_a3:
            got = next(obs)
            assert (got.value, got.token) == ("A3", lead_a3.token) and lead_a3.token > lead_b.token
        obs.close()


def test_proclaim_after_revoke_raises_and_marks_lost(client: lockd.Client) -> None:
    """A leadership revoked by an operator: its proclaim is refused
    (not_held) and marks it lost, even after the session won the name
    again under a new token, which keeps leading; leaving the with block
    is quiet."""
    name = "el/revoked"
    # A long TTL: keepalives (TTL/3) rarely tell of the revoke first.
    with client.session(ttl=30) as s:
        with s.campaign(name, "A") as lead:
            client.revoke(name)
            with pytest.raises(lockd.NotHeld):
                lead.proclaim("A2")
            assert lead.lost.is_set() and isinstance(lead.lost_reason, (lockd.NotHeld, lockd.Revoked))
            assert client.leader(name) is None and lead.value == "A"
            with s.campaign(name, "C") as again:
                assert again.token > lead.token
                with pytest.raises(lockd.NotHeld):
                    lead.proclaim("stale")  # the old term's token: refused though the session holds the name
                assert not again.lost.is_set()
                again.proclaim("C2")
                leader = client.leader(name)
                assert leader is not None and (leader.value, leader.token) == ("C2", again.token)
            assert client.leader(name) is None
        assert s.state == "alive"


def test_leaving_a_lost_sessions_campaign_is_quiet(client: lockd.Client) -> None:
    s = client.session(ttl=3)
    with s.campaign("el/lost", "A") as lead:
        client.call("DELETE", f"/v1/sessions/{s.id}")
        assert lead.lost.wait(15), "the leadership was not marked lost"
        with pytest.raises(lockd.SessionLost):
            lead.proclaim("A2")
    assert isinstance(lead.lost_reason, lockd.SessionLost)
    lead.resign()  # lost: nothing to give back, nothing raised
    s.close()


def test_leader_of_a_name_nobody_holds_is_none(client: lockd.Client) -> None:
    assert client.leader("el/nobody") is None
    assert client.leader("el/nobody", stale=True) is None


def test_value_over_4k_is_refused_and_nothing_written(client: lockd.Client) -> None:
    name, big = "el/big", "x" * 5120
    with client.session(ttl=10) as s:
        with pytest.raises(lockd.InvalidRequest) as ei:
            s.campaign(name, big, wait=0)
        assert ei.value.http_status == 400 and "4096" in ei.value.message
        assert client.get_lock(name) is None and client.leader(name) is None
        with s.campaign(name, "ok") as lead:
            before = client.get_lock(name)
            with pytest.raises(lockd.InvalidRequest):
                lead.proclaim(big)
            after = client.get_lock(name)
            assert before is not None and after is not None
            assert (after.version, after.holders[0].value) == (before.version, "ok")
            assert not lead.lost.is_set() and lead.value == "ok"


def test_lock_values(client: lockd.Client) -> None:
    """value= on the lock calls: a reentrant acquire keeps the hold's
    value unless it gives one; a session's proclaim replaces it."""
    name = "el/values"
    with client.session(ttl=10) as s:
        g = s.lock(name, value="v1")
        s.lock(name)
        assert [h.value for h in client.get_lock(name).holders] == ["v1"]  # type: ignore[union-attr]
        s.lock(name, value="v2")
        assert [h.value for h in client.get_lock(name).holders] == ["v2"]  # type: ignore[union-attr]
        version = s.proclaim(name, "v3", token=g.token)
        info = client.get_lock(name)
        assert info is not None and info.version == version and [h.value for h in info.holders] == ["v3"]
        with client.session(ttl=10) as r:
            r.rlock("el/shared", value="reader")
            assert [h.value for h in client.get_lock("el/shared").holders] == ["reader"]  # type: ignore[union-attr]


def test_observe_across_a_raft_leader_change(start_cluster: Callable[..., Cluster]) -> None:
    """The raft leader is killed while an observer blocks: the observer
    fails over, sees the leader's proclaim made after the failover (same
    token), then the successor, each once and in token order."""
    c = start_cluster()
    client = lockd.Client(c.addrs)
    name = "el/failover"
    with client.session(ttl=10, name="a") as a, client.session(ttl=10, name="b") as b:
        lead_a = a.campaign(name, "A")
        second = Background(lambda: b.campaign(name, "B", wait=120))
        eventually(lambda: queued(client, name, b), "b queues as a candidate")
        obs = lockd.Client(c.addrs).observe(name, timeout=180)
        got = next(obs)
        assert (got.value, got.token) == ("A", lead_a.token)

        def failover() -> None:
            old = c.leader()
            old.kill()
            c.leader([n for n in c.nodes if n is not old])
            lead_a.proclaim("A after the failover")
        during = Background(failover)
        after = next(obs, None)  # blocks through the kill and the election
        during.result()
        assert after is not None and (after.value, after.token) == ("A after the failover", lead_a.token)
        lead_a.resign()
        lead_b = second.result(120)
        got = next(obs)
        assert (got.value, got.token) == ("B", lead_b.token) and lead_b.token > lead_a.token
        assert not lead_b.lost.is_set()
        lead_b.resign()
        obs.close()


def test_observe_yields_each_change_once_in_token_order() -> None:
    """Against a node's scripted answers: an unchanged answer, a waiter
    that moves only the version, a dropped connection, a 503, an answer
    from behind (an older version with another value), nobody leading
    and a smaller token are not yielded; a new value under the same
    token and a larger token are, once each; every poll names the last
    version seen."""
    def election(version: int, leader: tuple[str, int] | None) -> Reply:
        lead = None if leader is None else {"value": leader[0], "token": leader[1]}
        return 200, {"name": "x", "version": version, "leader": lead, "candidates": 0}, \
            {"X-Lock-Index": str(version)}
    script: list[Reply] = [
        election(5, ("A", 3)), election(5, ("A", 3)), election(6, ("A", 3)), None,
        (503, {"error": {"code": "no_leader", "message": "electing"}}),
        election(4, ("A-older", 3)), election(7, ("A2", 3)), election(8, None), election(9, ("Z", 2)),
        election(10, ("B", 5))]
    indexes: list[str] = []

    def route(method: str, path: str) -> Reply:
        url = urlsplit(path)
        if url.path != "/v1/elections/x":
            return 200, {}
        indexes.append(parse_qs(url.query, keep_blank_values=True).get("index", ["-"])[0])
        return script.pop(0) if script else election(10, ("B", 5))

    with fake_node(route) as addr:
        client = lockd.Client(addr, retry=lockd.RetryPolicy(min_backoff=0.01, max_backoff=0.05))
        obs = client.observe("x", timeout=30)
        got = [next(obs) for _ in range(3)]
        obs.close()
    assert got == [lockd.Leader("A", 3), lockd.Leader("A2", 3), lockd.Leader("B", 5)]
    assert indexes[:10] == ["-", "5", "5", "6", "6", "6", "6", "7", "8", "9"], indexes


# ---- the example -------------------------------------------------------------

EXAMPLE = PACKAGE / "examples" / "election.py"


class Proc:
    """A process of the example, its output lines read as they come."""

    def __init__(self, addrs: list[str], *args: str) -> None:
        env = dict(os.environ, LOCKD_ADDR=",".join(addrs), PYTHONPATH=str(PACKAGE), PYTHONUNBUFFERED="1")
        self.p = subprocess.Popen([sys.executable, str(EXAMPLE), *args], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(self.p.stdout,), daemon=True).start()

    def _read(self, out: IO[str]) -> None:
        for line in out:
            self.lines.put(line.rstrip("\n"))

    def expect(self, prefix: str, timeout: float = 60) -> str:
        """The next line that starts with prefix (earlier ones kept in seen)."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no line {prefix!r} within {timeout}s; seen: {self.seen}")
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def stop(self) -> int:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        return self.p.wait(timeout=30)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for pr in started:
        if pr.p.poll() is None:
            pr.p.kill()
            pr.p.wait()


def test_example_replicas_and_router(cluster: Cluster, client: lockd.Client, procs: list[Proc]) -> None:
    """examples/election.py: replica a is elected and serves, b waits; the
    client routes to a; a stopped (SIGTERM) resigns, b takes over with a
    larger token, and the client routes to b."""
    name = "el/example"
    a = Proc(cluster.addrs, "replica", "--name", name, "--id", "a")
    procs.append(a)
    token_a = int(a.expect("a: elected").split("token ")[1].rstrip(")"))
    b = Proc(cluster.addrs, "replica", "--name", name, "--id", "b")
    procs.append(b)
    b.expect("b: candidate")
    eventually(lambda: (i := client.get_lock(name)) and i.waiters, "b queues")
    router = Proc(cluster.addrs, "client", "--name", name, "--every", "0.05")
    procs.append(router)
    assert router.expect("client:").endswith(f"answered: a token={token_a}")
    assert a.stop() == 0, a.seen
    token_b = int(b.expect("b: elected").split("token ")[1].rstrip(")"))
    assert token_b > token_a
    assert router.expect("client:").endswith(f"answered: b token={token_b}")
    assert b.stop() == 0 and router.stop() in (0, -signal.SIGTERM)
    eventually(lambda: client.leader(name) is None, "b resigned on its way out")
