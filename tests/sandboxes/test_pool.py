"""The sandbox pool: warm, healthy, fresh per episode, bounded, and empty after it closes."""

from __future__ import annotations

import asyncio

import pytest

from agentgym.sandboxes import SandboxClosed, SandboxSpec, backend_module
from agentgym.sandboxes.pool import SandboxPool, release_pool, retain_pool


async def settle(pool: SandboxPool) -> None:
    """Wait until the pool has finished warming up."""
    for _ in range(600):
        if not pool._fillers:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the pool never finished warming up")


def test_sandboxes_are_warm_fresh_per_episode_and_counted(backend):
    async def scenario() -> None:
        async with SandboxPool(backend, size=2) as pool:
            first = await pool.acquire()
            await first.write_file("state.txt", "episode 1")
            await settle(pool)
            assert len(pool._idle) == 2  # warmed up behind the first acquire
            await pool.release(first)
            assert first.closed and first.id not in backend_module(backend).live()
            second = await pool.acquire()
            assert second is not first
            with pytest.raises(FileNotFoundError):
                await second.read_file("state.txt")
            metrics = pool.metrics.log_dict()
            assert metrics["sandbox/acquired"] == 2 and metrics["sandbox/created"] >= 3
            assert metrics["sandbox/acquire_seconds_max"] > 0

    asyncio.run(scenario())


def test_a_dead_warm_sandbox_is_replaced(backend):
    async def scenario() -> None:
        async with SandboxPool(backend, size=1) as pool:
            await pool.release(await pool.acquire())
            await settle(pool)
            assert len(pool._idle) == 1  # warmed up to its size, not past it
            warm = pool._idle[0]
            await warm.close()  # dies behind the pool's back
            replacement = await pool.acquire()
            assert replacement is not warm and (await replacement.exec("echo ok", timeout=10)).stdout == "ok\n"
            assert pool.metrics.replaced == 1

    asyncio.run(scenario())


def test_the_pool_is_bounded_and_a_release_lets_a_waiter_in(backend):
    async def scenario() -> None:
        async with SandboxPool(backend, size=0, max_size=2) as pool:
            held = [await pool.acquire(), await pool.acquire()]
            waiter = asyncio.create_task(pool.acquire())
            await asyncio.sleep(0.5)
            assert not waiter.done() and pool.live == 2
            await pool.release(held[0])
            third = await asyncio.wait_for(waiter, timeout=60)
            assert pool.live <= 2 and third not in held

    asyncio.run(scenario())


def test_closing_the_pool_removes_idle_and_handed_out_sandboxes(backend):
    async def scenario() -> list[str]:
        pool = SandboxPool(backend, size=2)
        leased = await pool.acquire()
        await settle(pool)
        ids = [leased.id, *(s.id for s in pool._idle)]
        await pool.close()
        await pool.close()
        with pytest.raises(SandboxClosed):
            await pool.acquire()
        return ids

    ids = asyncio.run(scenario())
    assert len(ids) == 3 and not set(ids) & set(backend_module(backend).live())


def test_environments_on_one_loop_share_a_pool_until_the_last_lets_go(backend):
    async def scenario() -> None:
        spec = SandboxSpec()
        first, second = retain_pool(backend, spec, 1), retain_pool(backend, spec, 1)
        assert first is second
        sandbox = await first.acquire()
        await release_pool(first)
        assert not sandbox.closed
        await release_pool(second)
        assert sandbox.closed
        third = retain_pool(backend, spec, 1)
        assert third is not first
        await release_pool(third)

    asyncio.run(scenario())
