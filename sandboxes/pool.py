"""Pre-warmed sandboxes of one backend and spec: environments take one per episode and give it back.

A returned sandbox is closed, never handed out again, so no state crosses from one episode to the next;
the pool starts fresh ones in the background to stay ``size`` warm, never holding more than ``max_size``.
A warm sandbox has answered a command before it is handed out, and one that died while waiting
(:attr:`Sandbox.alive`) is replaced, so :meth:`SandboxPool.acquire` asks no sandbox anything.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Self

from agentgym.loop_shared import LoopShared
from agentgym.sandboxes import open_sandbox
from agentgym.sandboxes.base import Sandbox, SandboxSpec
from agentgym.sandboxes.errors import SandboxClosed, SandboxError, SandboxStartError

HEALTH_TIMEOUT = 10.0
"""Seconds a new sandbox has to answer ``true`` before it counts as failed to start."""


@dataclass
class PoolMetrics:
    """Counters of one pool, for the run's metrics."""

    acquired: int = 0
    created: int = 0
    start_failures: int = 0
    """Sandboxes that failed to start or to answer their first command."""
    replaced: int = 0
    """Warm sandboxes that died while waiting, replaced at acquire."""
    acquire_seconds_total: float = 0.0
    acquire_seconds_max: float = 0.0

    def log_dict(self) -> dict[str, float]:
        """``sandbox/``-namespaced figures."""
        mean = self.acquire_seconds_total / self.acquired if self.acquired else 0.0
        return {"sandbox/acquired": self.acquired, "sandbox/created": self.created,
                "sandbox/start_failures": self.start_failures, "sandbox/replaced": self.replaced,
                "sandbox/acquire_seconds_mean": mean, "sandbox/acquire_seconds_max": self.acquire_seconds_max}


class SandboxPool:
    """Hands out started, healthy sandboxes of ``backend`` made from ``spec``. Bound to the event loop that
    first uses it; :meth:`close` removes every sandbox it made, handed out or not."""

    def __init__(self, backend: str, spec: SandboxSpec | None = None, *, size: int = 2, max_size: int = 64) -> None:
        """``size`` sandboxes are kept warm; at most ``max_size`` exist at once (an acquire past it waits)."""
        if not 0 <= size <= max_size or max_size < 1:
            raise ValueError(f"need 0 <= size <= max_size and max_size >= 1, got size={size}, max_size={max_size}")
        self.backend, self.spec, self.size, self.max_size = backend, spec or SandboxSpec(), size, max_size
        self.metrics = PoolMetrics()
        self._idle: list[Sandbox] = []
        self._leased: set[Sandbox] = set()
        self._starting = 0
        """Sandboxes an acquire is starting for itself."""
        self._warming = 0
        """Sandboxes starting in the background for the idle list; counted down as one lands there."""
        self._room = asyncio.Condition()
        self._fillers: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def live(self) -> int:
        """Sandboxes that exist or are starting: idle, handed out and on their way."""
        return len(self._idle) + len(self._leased) + self._starting + self._warming

    async def acquire(self) -> Sandbox:
        """A started sandbox, warm when one is; waits while ``max_size`` are out. Raises
        :class:`SandboxStartError` when a new one cannot start, :class:`SandboxClosed` after :meth:`close`."""
        started = time.perf_counter()
        sandbox = await self._take()
        self._leased.add(sandbox)
        elapsed = time.perf_counter() - started
        self.metrics.acquired += 1
        self.metrics.acquire_seconds_total += elapsed
        self.metrics.acquire_seconds_max = max(self.metrics.acquire_seconds_max, elapsed)
        self._refill()
        return sandbox

    async def release(self, sandbox: Sandbox) -> None:
        """Give back a sandbox from :meth:`acquire`: it is closed, and a fresh one warms up in its place."""
        self._leased.discard(sandbox)
        await sandbox.close()
        await self._notify()
        self._refill()

    async def close(self) -> None:
        """Stop warming up and close every sandbox this pool made; safe to call twice. Sandboxes still
        starting are waited for, then closed (a cancelled start could leave one behind)."""
        self._closed = True
        await asyncio.gather(*self._fillers, return_exceptions=True)
        everything = [*self._idle, *self._leased]
        self._idle.clear()
        self._leased.clear()
        await asyncio.gather(*(s.close() for s in everything), return_exceptions=True)
        await self._notify()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing ---------------------------------------------------------------------------------

    async def _take(self) -> Sandbox:
        while True:
            if self._closed:
                raise SandboxClosed("the sandbox pool is closed")
            if self._idle:
                sandbox = self._idle.pop()
                if sandbox.alive:
                    return sandbox
                self.metrics.replaced += 1
                await sandbox.close()
                continue
            if self.live < self.max_size:
                self._starting += 1
                try:
                    return await self._start()
                finally:
                    self._starting -= 1
            async with self._room:
                await self._room.wait()

    async def _start(self) -> Sandbox:
        try:
            sandbox = await open_sandbox(self.backend, self.spec)
        except SandboxError as exc:
            self.metrics.start_failures += 1
            raise SandboxStartError(f"a {self.backend} sandbox could not start: {exc}") from exc
        self.metrics.created += 1
        return sandbox

    def _refill(self) -> None:
        missing = min(self.size - len(self._idle) - self._warming, self.max_size - self.live)
        for _ in range(max(0, missing) if not self._closed else 0):
            self._warming += 1
            task = asyncio.get_running_loop().create_task(self._warm_one())
            self._fillers.add(task)
            task.add_done_callback(self._fillers.discard)

    async def _warm_one(self) -> None:
        try:
            sandbox = await self._start()
            healthy = not self._closed and await self._answers(sandbox)
        except SandboxStartError:
            return  # counted; the next acquire starts one itself and reports the cause
        finally:
            self._warming -= 1
        if healthy:
            self._idle.append(sandbox)
        else:
            await sandbox.close()
        await self._notify()

    async def _answers(self, sandbox: Sandbox) -> bool:
        try:
            if (await sandbox.exec(["true"], timeout=HEALTH_TIMEOUT)).ok:
                return True
        except SandboxError:
            pass
        self.metrics.start_failures += 1
        return False

    async def _notify(self) -> None:
        async with self._room:
            self._room.notify_all()


_SHARED: LoopShared[SandboxPool] = LoopShared(SandboxPool.close)


def retain_pool(backend: str, spec: SandboxSpec, size: int) -> SandboxPool:
    """The pool of ``backend`` and ``spec`` shared by the environments on the running event loop; each call
    must be matched by one :func:`release_pool`, and the last one closes it."""
    return _SHARED.retain((backend, spec.model_dump_json()),
                          lambda: SandboxPool(backend, spec, size=size, max_size=max(64, size)))


async def release_pool(pool: SandboxPool) -> None:
    """Let go of a pool from :func:`retain_pool`; the last holder closes it."""
    await _SHARED.release(pool)
