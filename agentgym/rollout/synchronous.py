"""Synchronous batch rollout, the way synchronous trainers roll out: the baseline agentgym is measured against.

A batch of episodes advances in lockstep: every turn waits until all of the batch's environments
have stepped, then until all of its generations are done, before any episode moves on. Episodes are
the same :func:`~agentgym.episode.run_episode` as in the asynchronous rollout; only the barrier differs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from agentgym.core import Env
from agentgym.episode import Timeouts, run_episode
from agentgym.messages import Message
from agentgym.policies import Policy, PolicySession
from agentgym.registration import make
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory


class _Barrier:
    """A barrier whose party shrinks as episodes end."""

    def __init__(self, parties: int) -> None:
        self.parties, self.waiting = parties, 0
        self._open = asyncio.Event()

    async def arrive(self) -> None:
        self.waiting += 1
        opened = self._open
        if self.waiting >= self.parties:
            self._release()
        else:
            await opened.wait()

    def leave(self) -> None:
        self.parties -= 1
        if self.waiting and self.waiting >= self.parties:
            self._release()

    def _release(self) -> None:
        self.waiting, opened, self._open = 0, self._open, asyncio.Event()
        opened.set()


class _LockstepPolicy:
    def __init__(self, policy: Policy, barrier: _Barrier) -> None:
        self.policy, self.barrier, self.name = policy, barrier, policy.name

    def start(self, env: Env, rng: np.random.Generator) -> PolicySession:
        return _LockstepSession(self.policy.start(env, rng), self.barrier)


class _LockstepSession:
    def __init__(self, inner: PolicySession, barrier: _Barrier) -> None:
        self.inner, self.barrier = inner, barrier

    async def act(self, observation: list[Message]) -> str:
        await self.barrier.arrive()  # every environment of the batch has stepped
        action = await self.inner.act(observation)
        await self.barrier.arrive()  # every generation of the batch is done
        return action

    def record(self, trajectory: Trajectory) -> None:
        self.barrier.leave()
        self.inner.record(trajectory)


async def run_lockstep(
    env_id: str,
    policy: Policy,
    tasks: list[Task],
    *,
    seed: int = 0,
    timeouts: Timeouts | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> list[Trajectory]:
    """Play ``tasks`` as one synchronous batch; trajectories in task order."""
    barrier = _Barrier(len(tasks))
    lockstep = _LockstepPolicy(policy, barrier)
    envs = [make(env_id, **(env_kwargs or {})) for _ in tasks]
    try:
        return list(
            await asyncio.gather(
                *(run_episode(env, lockstep, task, seed=(seed, i), timeouts=timeouts) for i, (env, task) in enumerate(zip(envs, tasks)))
            )
        )
    finally:
        for env in envs:
            env.close()
