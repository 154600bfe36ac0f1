"""Environment instances reused across episodes: a healthy one goes back to the pool, a failed one is closed."""

from __future__ import annotations

from typing import Any

from agentgym.core import Env
from agentgym.registration import make


class EnvPool:
    """Hands out instances of one environment id; never more idle ones than ``max_idle``."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None, *, max_idle: int = 1024) -> None:
        self.env_id, self.env_kwargs, self.max_idle = env_id, dict(env_kwargs or {}), max_idle
        self._idle: list[Env] = []
        self.created = 0

    def acquire(self) -> Env:
        """An idle instance, or a new one."""
        if self._idle:
            return self._idle.pop()
        self.created += 1
        return make(self.env_id, **self.env_kwargs)

    async def release(self, env: Env, *, healthy: bool) -> None:
        """Take an instance back; one that failed (or one too many) is closed, never reused."""
        if healthy and len(self._idle) < self.max_idle:
            self._idle.append(env)
        else:
            await env.aclose()

    async def close(self) -> None:
        """Close every idle instance; safe to call twice."""
        while self._idle:
            await self._idle.pop().aclose()
