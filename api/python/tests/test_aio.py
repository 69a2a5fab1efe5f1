"""lockd.aio against a real dev node: awaiting never blocks the loop, and a
cancelled acquire leaves nothing behind (redis-py#3255: asyncio locks
that hang)."""

from __future__ import annotations

import asyncio

import pytest

import lockd
import lockd.aio
from conftest import Cluster, eventually


def test_aio_lock(dev: Cluster) -> None:
    async def main() -> None:
        async with lockd.aio.Client(dev.addrs) as c:
            async with await c.session(ttl=5, name="aio") as s:
                async with await s.lock("aio/basic", wait=5) as g:
                    assert await c.check("aio/basic", g.token)
                    assert not g.lost.is_set()
                assert not await c.check("aio/basic", g.token)
                other = await c.session(ttl=5)
                held = await other.lock("aio/held")
                with pytest.raises(lockd.Locked):
                    await s.try_lock("aio/held")
                await held.release()
                await other.close()
    asyncio.run(main())


def test_aio_cancel_withdraws_the_request(dev: Cluster) -> None:
    """wait_for cancels a waiting lock() promptly, the loop keeps running
    meanwhile, and the request does not stay queued or get granted later."""
    sync = lockd.Client(dev.addrs)

    async def main() -> None:
        c = lockd.aio.Client(dev.addrs)
        holder = await c.session(ttl=5)
        waiter = await c.session(ttl=5)
        held = await holder.lock("aio/cancel")
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1
        ticker = asyncio.create_task(tick())
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(waiter.lock("aio/cancel"), timeout=0.5)
        ticker.cancel()
        assert ticks > 0, "the event loop was blocked while waiting"
        info = sync.get_lock("aio/cancel")
        assert info is not None and info.waiters == [], "the cancelled request is still queued"
        await held.release()
        # Nobody waits for it, so it stays free: the cancelled waiter did
        # not get it behind our back.
        third = await c.session(ttl=5)
        g = await third.try_lock("aio/cancel")
        assert [h.session for h in (sync.get_lock("aio/cancel") or lockd.LockInfo("", 0, 1)).holders] == [third.id]
        await g.release()
        info2 = await waiter.info()
        assert info2.held == [] and info2.pending == []
        for s in (holder, waiter, third):
            await s.close()
    asyncio.run(main())


def test_aio_lost(dev: Cluster) -> None:
    sync = lockd.Client(dev.addrs)

    async def main() -> None:
        c = lockd.aio.Client(dev.addrs)
        # Nothing here waits for the TTL: 5s, as the other tests, so that a
        # loaded machine starving the keepalive thread for the 1.6s a 2s
        # session allows does not lose it before the revoke.
        s = await c.session(ttl=5)
        g = await s.lock("aio/lost")
        await c.revoke("aio/lost")
        reason = await asyncio.wait_for(g.lost_async(), timeout=15)
        assert isinstance(reason, lockd.Revoked)
        sync.call("DELETE", f"/v1/sessions/{s.id}")
        err = await asyncio.wait_for(s.wait_lost(), timeout=15)
        assert isinstance(err, lockd.SessionLost) and s.state == "lost"
        await s.close()
    asyncio.run(main())
    eventually(lambda: sync.get_lock("aio/lost") is None, "nothing left")


def test_aio_election(dev: Cluster) -> None:
    """async with campaign, leader, observe and proclaim; a candidate
    elected when the leader leaves its async with block; a campaign
    cancelled while queued leaves no candidate behind."""
    name = "aio/election"

    async def main() -> None:
        async with lockd.aio.Client(dev.addrs) as c:
            a, b, d = await c.session(ttl=10), await c.session(ttl=10), await c.session(ttl=10)
            assert await c.leader(name) is None
            obs = c.observe(name, timeout=60)

            async def elect(s: lockd.aio.Session, value: str) -> lockd.aio.Leadership:
                return await s.campaign(name, value, wait=30)
            async with a.campaign(name, "A") as lead_a:
                assert (await anext(obs)) == await c.leader(name)
                assert (lead_a.value, lead_a.token > 0) == ("A", True)
                candidate = asyncio.create_task(elect(b, "B"))
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(elect(d, "D"), timeout=0.5)
                eventually(lambda: [w.session for w in (sync.get_lock(name) or lockd.LockInfo("", 0, 1)).waiters]
                           == [b.id], "b queues, d's cancelled campaign does not")
                await lead_a.proclaim("A2")
                got = await anext(obs)
                assert (got.value, got.token) == ("A2", lead_a.token)
            lead_b = await candidate
            got = await anext(obs)
            assert (got.value, got.token) == ("B", lead_b.token) and lead_b.token > lead_a.token
            await lead_b.resign()
            assert await c.leader(name) is None and not lead_b.lost.is_set()
            await obs.aclose()
            for s in (a, b, d):
                await s.close()
    sync = lockd.Client(dev.addrs)
    asyncio.run(main())
