"""Against a real 3-node cluster: mutual exclusion across processes, and a
leader killed while a lock is held."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import lockd
from conftest import HERE, Cluster, eventually


def test_mutual_exclusion_across_processes(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    (tmp_path / "counter").write_text("0")
    workers, rounds = 3, 5
    procs = [subprocess.Popen([sys.executable, str(HERE / "worker.py"), ",".join(c.addrs), str(tmp_path),
                               str(rounds)]) for _ in range(workers)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    assert not list(tmp_path.glob("violation-*")), "two processes held the lock at once"
    assert int((tmp_path / "counter").read_text()) == workers * rounds
    tokens = [int(t) for t in (tmp_path / "tokens").read_text().split()]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), "fencing tokens must increase"


def test_leader_kill_during_held_lock(cluster: Cluster) -> None:
    """SIGKILL of the leader while a lock is held: the client fails over, the
    keepalives go on, the grant survives with its token, and nothing is
    reported lost. (Kills a node of the module's cluster: runs last.)"""
    c = cluster
    client = lockd.Client(c.addrs)
    states: list[str] = []
    with client.session(ttl=5, name="survivor") as s:
        s.add_listener(lambda st, err: states.append(st))
        with s.lock("jobs/failover", wait=10) as g:
            leader = c.leader()
            leader.kill()
            survivors = [n for n in c.nodes if n is not leader]
            c.leader(survivors)
            killed_at = time.monotonic()
            # The grant is still the holder's, as the new leader sees it.
            eventually(lambda: client.check("jobs/failover", g.token), "the grant survives the failover")
            assert client.leader_url.removeprefix("http://") in [n.http_addr for n in survivors]
            # Let more than a TTL pass: a session whose keepalives did not
            # get through would be lost by now.
            while time.monotonic() - killed_at < s.ttl + 1:
                assert not s.lost.is_set() and not g.lost.is_set()
                time.sleep(0.2)
            assert s.state in ("alive", "suspended") and "lost" not in states
            eventually(lambda: s.state == "alive", "keepalives succeed again")
            with client.session(ttl=5) as other:
                try:
                    other.try_lock("jobs/failover")
                    raise AssertionError("another session got the lock while it was held")
                except lockd.Locked:
                    pass
            assert client.check("jobs/failover", g.token)
        assert not g.lost.is_set()
        assert not client.check("jobs/failover", g.token)
