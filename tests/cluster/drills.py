"""Rollouts on a test cluster with a fault injected alongside, and waiting for what Ray restarts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentgym.rollout import GroupId, RolloutConfig, RolloutScheduler
from agentgym.rollout.runner import Backend
from agentgym.tasks import TaskSet
from agentgym.trajectory import Trajectory
from tests.cluster.conftest import ray

LAKE = "games/FrozenLake-v0"


async def roll(policy: Any, tasks: TaskSet, config: RolloutConfig, backend: Backend | None = None, *,
                env_kwargs: dict[str, Any] | None = None, meanwhile: Any = None) -> tuple[Any, list[Trajectory]]:
    """Run a rollout to its end; ``meanwhile(delivered)`` is awaited alongside (a fault drill)."""
    scheduler = RolloutScheduler(LAKE, policy, config, backend=backend, env_kwargs=env_kwargs)
    seen: list[Trajectory] = []

    async def read() -> None:
        async for trajectory in scheduler.stream:
            seen.append(trajectory)

    async with asyncio.TaskGroup() as group:
        group.create_task(read())
        if meanwhile is not None:
            group.create_task(meanwhile(seen))
        metrics = await scheduler.run(tasks)
    return metrics, seen


def groups(trajectories: list[Trajectory]) -> dict[GroupId, list[tuple[Any, ...]]]:
    """The kept episodes of each group: seeds, actions and reward, in seed order."""
    found: dict[GroupId, list[tuple[Any, ...]]] = {}
    for t in trajectories:
        if t.status != "error":
            found.setdefault(GroupId.of(t), []).append(
                (tuple(t.info["seed"]), tuple(turn.action for turn in t.turns), t.reward))
    return {key: sorted(members) for key, members in found.items()}


async def once_delivered(seen: list[Trajectory], count: int) -> None:
    """Return once ``count`` trajectories have been delivered."""
    while len(seen) < count:
        await asyncio.sleep(0.02)


def when_back(call: Any, seconds: float = 60.0) -> Any:
    """``call()``'s answer once its actor is up again (a restarting actor refuses calls meanwhile)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return ray.get(call(), timeout=seconds)
        except ray.exceptions.ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
