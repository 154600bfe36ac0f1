"""Environment instances reused across episodes: a healthy one goes back to the pool, a failed one is closed.

Each close runs in a task of its own, so cancelling the episode that gave an instance back never cuts
its close short (a sandbox half given back leaks), and it is bounded by ``close_timeout``. A close that
raises or runs out of time is logged and counted, never raised: the episode's trajectory is kept.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agentgym.core import Env
from agentgym.registration import EnvSpec, make

logger = logging.getLogger(__name__)


class EnvPool:
    """Hands out instances of one environment (an id, or a spec, which needs no registration); never more idle
    ones than ``max_idle``; each close may take ``close_timeout`` seconds (``None``: no limit)."""

    def __init__(self, env: str | EnvSpec, env_kwargs: dict[str, Any] | None = None, *, max_idle: int = 1024,
                 close_timeout: float | None = None) -> None:
        self.env, self.env_kwargs, self.max_idle = env, dict(env_kwargs or {}), max_idle
        self.env_id = env.id if isinstance(env, EnvSpec) else env
        self.close_timeout = close_timeout
        self._idle: list[Env] = []
        self._closing: set[asyncio.Task[None]] = set()
        self.created = 0
        self.close_errors = 0
        """Instances whose close raised or ran out of time (what they held may be left behind)."""

    def acquire(self) -> Env:
        """An idle instance, or a new one."""
        if self._idle:
            return self._idle.pop()
        self.created += 1
        return make(self.env, **self.env_kwargs)

    def release(self, env: Env, *, healthy: bool) -> None:
        """Take an instance back; one that failed (or one too many) starts closing, never reused."""
        if healthy and len(self._idle) < self.max_idle:
            self._idle.append(env)
        else:
            self._close_soon(env)

    async def close(self) -> None:
        """Close every idle instance and wait for every close under way; safe to call twice."""
        while self._idle:
            self._close_soon(self._idle.pop())
        if self._closing:
            await asyncio.wait(self._closing)

    def _close_soon(self, env: Env) -> None:
        task = asyncio.get_running_loop().create_task(self._close(env))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, env: Env) -> None:
        try:
            async with asyncio.timeout(self.close_timeout):
                await env.aclose()
        except Exception as exc:  # noqa: BLE001 - the instance is dropped either way; the rollout goes on
            self.close_errors += 1
            logger.warning("closing an instance of %s failed: %r", self.env_id, exc)
