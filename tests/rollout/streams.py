"""Running a scheduler in a test and keeping what its stream delivered."""

from __future__ import annotations

import asyncio

from agentgym.rollout import RolloutScheduler


async def delivered(scheduler: RolloutScheduler, tasks, *, into: list | None = None) -> list:
    """Run ``scheduler`` over ``tasks`` to its end and return every trajectory its stream delivered (appended to
    ``into`` as they come, where given, for a test to watch)."""
    seen = [] if into is None else into

    async def read() -> None:
        async for trajectory in scheduler.stream:
            seen.append(trajectory)

    async with asyncio.TaskGroup() as group:
        group.create_task(read())
        await scheduler.run(tasks)
    return seen
