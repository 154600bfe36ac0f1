"""The base of environments whose episodes run in sandboxes: a fresh one per episode, from a shared pool."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, ClassVar

from agentgym.core import Env
from agentgym.errors import ToolError
from agentgym.sandboxes import choose_backend
from agentgym.sandboxes.base import Sandbox, SandboxSpec
from agentgym.sandboxes.errors import SandboxError, SandboxKilledFromInside
from agentgym.sandboxes.pool import SandboxPool, release_pool, retain_pool

COMMAND_TIME_LIMIT = 10.0
"""Default seconds one of an agent's commands may run in the sandbox before it is stopped."""
MAX_POOLS = 10
"""The most pools (one per sandbox spec, each keeping sandboxes warm) that one environment holds at once."""


class SandboxEnv(Env):
    """An environment with a sandbox per episode. :meth:`start_sandbox` (called from ``setup``) gives back the
    last episode's sandbox and takes a fresh one, of the class's spec or of one the episode names (one pool per
    spec); tools use :attr:`sandbox`. ``backend`` is ``docker``,
    ``local`` or ``auto``; ``pool_size`` sandboxes are kept warm per event loop; ``time_limit`` is the
    seconds each of the agent's commands may run.

    What the agent does to its sandbox is its own outcome. A command that fails, runs out of time, disk or
    processes is a result the agent reads; a sandbox that dies of what ran inside it
    (:class:`SandboxKilledFromInside`) during a tool call ends the episode as the agent's failure: the call
    answers with the error, reward 0, ``terminated``. Any other :class:`SandboxError` (the container removed
    from outside, the engine gone) is raised: the episode is an infrastructure ``error``, as is a death
    while the episode is set up, before the agent has acted."""

    sandbox_spec: ClassVar[SandboxSpec] = SandboxSpec()
    """The image and limits this environment's sandboxes have."""
    forkable = "replay"
    """A sandbox cannot be copied cheaply, so a child gets a fresh one and replays the parent's commands: the task's
    files are laid down with a fixed time, so the same seed and commands give the same outputs, unless a command
    shows what no seed sets (the clock, the host name, random bytes), which the replay reports as divergence."""

    def __init__(self, *, backend: str = "auto", pool_size: int = 2, time_limit: float = COMMAND_TIME_LIMIT,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if time_limit <= 0:
            raise ValueError(f"time_limit must be positive, got {time_limit}")
        self.time_limit = time_limit
        self.backend = choose_backend(backend, self.sandbox_spec)
        self.pool_size = pool_size
        self._pools: OrderedDict[str, SandboxPool] = OrderedDict()
        """The pools this environment holds, by spec, the most recently used last."""
        self._sandbox: tuple[Sandbox, SandboxPool] | None = None

    @property
    def sandbox(self) -> Sandbox:
        """The current episode's sandbox."""
        if self._sandbox is None:
            raise SandboxError("no sandbox: the episode has not started")
        return self._sandbox[0]

    async def start_sandbox(self, spec: SandboxSpec | None = None) -> Sandbox:
        """Give back the previous episode's sandbox (it is closed) and take a fresh one for this episode, made from
        ``spec`` (default: :attr:`sandbox_spec`)."""
        await self._give_back()
        pool = await self._pool(spec or self.sandbox_spec)
        self._sandbox = (await pool.acquire(), pool)
        return self._sandbox[0]

    @asynccontextmanager
    async def another_sandbox(self, spec: SandboxSpec | None = None) -> AsyncIterator[Sandbox]:
        """A fresh sandbox besides the episode's, from the same pools, closed on leaving (a clean copy to grade
        in, say)."""
        pool = await self._pool(spec or self.sandbox_spec)
        sandbox = await pool.acquire()
        try:
            yield sandbox
        finally:
            await pool.release(sandbox)

    async def aclose(self) -> None:
        await self._let_go()
        super().close()

    def close(self) -> None:
        if self._pools:
            self._run_sync(self._let_go())
        super().close()

    async def _run_tool(self, name: str, fn: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        """Run a tool; a sandbox that its commands brought down ends the episode as the agent's failure."""
        try:
            return await super()._run_tool(name, fn, arguments)
        except SandboxKilledFromInside as exc:
            self.finish(success=False, reward=0.0)
            raise ToolError(f"the sandbox was brought down by what ran in it, and the episode ends as a "
                            f"failure: {exc}") from exc

    async def _pool(self, spec: SandboxSpec) -> SandboxPool:
        """The pool of ``spec``, retained on first use; past :attr:`MAX_POOLS` specs the least recently used pool
        that the episode's sandbox is not from is let go."""
        key = spec.model_dump_json()
        if key not in self._pools:
            self._pools[key] = retain_pool(self.backend, spec, self.pool_size)
        self._pools.move_to_end(key)
        in_use = self._sandbox[1] if self._sandbox is not None else None
        for old in [k for k, pool in self._pools.items() if pool is not in_use][: max(0, len(self._pools) - MAX_POOLS)]:
            await release_pool(self._pools.pop(old))
        return self._pools[key]

    async def _let_go(self) -> None:
        """Give back the sandbox and the pools (the last environment holding a pool closes it)."""
        await self._give_back()
        while self._pools:
            await release_pool(self._pools.popitem()[1])

    async def _give_back(self) -> None:
        held, self._sandbox = self._sandbox, None
        if held is not None:
            await held[1].release(held[0])
