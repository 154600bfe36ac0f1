"""The trainer takes closed groups with their task positions, as they finish or in the order handed out."""

from __future__ import annotations

import asyncio
import itertools
from operator import itemgetter

import pytest

from agentgym import TaskSet
from agentgym.policies import TextPolicy
from agentgym.rollout import RolloutConfig, RolloutScheduler
from agentgym.trainers.draw import closed_groups
from tests.waiting import until_async

SLOW, FAILING = 5, {1, 6}


class SlowOrFailing(TextPolicy):
    """The oracle, failing (an infrastructure error) on the tasks of ``FAILING``, and acting on the task of seed
    ``SLOW`` only once ``others`` groups have closed (as :meth:`closed` counts them)."""

    name = "slow-or-failing"

    def __init__(self, others: int) -> None:
        self.others = others
        self.closed: list[int] = []

    async def act(self, env, messages, rng):
        if env.np_random_seed in FAILING:
            raise ConnectionError("the inference server went away")
        if env.np_random_seed == SLOW:
            await until_async(lambda: len(self.closed) >= self.others, "the other groups closing")
        return env.oracle_action()


@pytest.mark.parametrize("in_order", [True, False])
def test_groups_come_with_their_positions_failed_ones_marked(registered_counter, in_order):
    handed_out = [SLOW, 1, 0, 4, 6]  # pending positions first, say, then new ones
    tasks = [TaskSet.generate("test/Counter-v0", 1, start=position)[0] for position in handed_out]
    policy = SlowOrFailing(others=len(handed_out) - 1)
    finished = policy.closed
    config = RolloutConfig(concurrency=10, group_size=2, max_retries=0)
    scheduler = RolloutScheduler("test/Counter-v0", policy, config, on_group=lambda group: finished.append(group.index))

    async def run() -> list[tuple[int, list[int] | None]]:
        async with asyncio.TaskGroup() as group:
            group.create_task(scheduler.run(tasks, indices=handed_out))
            order = itertools.chain(handed_out, itertools.count(100))  # the trainer's never ends
            return [(group.id.index, [t.task.seed for t in group.members] if group.complete else None)
                    async for group in closed_groups(scheduler.stream, order, in_order=in_order)]

    closed = asyncio.run(asyncio.wait_for(run(), timeout=60))
    assert finished[-1] == SLOW  # the first handed out finished last...
    expected = [(SLOW, [SLOW, SLOW]), (1, None), (0, [0, 0]), (4, [4, 4]), (6, None)]
    if in_order:
        assert closed == expected  # ...yet comes first
    else:
        assert closed[-1] == expected[0] and sorted(closed, key=itemgetter(0)) == sorted(expected, key=itemgetter(0))
