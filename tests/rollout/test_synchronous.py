"""The synchronous baseline really is lockstep: every turn of a batch starts together."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

from agentgym import TaskSet
from agentgym.policies import TextPolicy
from agentgym.rollout.synchronous import run_lockstep


class TimedAdder(TextPolicy):
    """Adds 1 per turn after a random pause, noting when each of its turns began."""

    name = "timed"

    def __init__(self) -> None:
        self.starts: dict[int, list[float]] = defaultdict(list)

    async def act(self, env, messages, rng):
        self.starts[env.turn].append(time.perf_counter())
        await asyncio.sleep(float(rng.uniform(0, 0.05)))
        return env.format_call("add", amount=1)


def test_every_turn_of_the_batch_waits_for_the_slowest(registered_counter):
    policy = TimedAdder()
    tasks = list(TaskSet.generate("test/Counter-v0", 6))
    trajectories = asyncio.run(run_lockstep("test/Counter-v0", policy, tasks, seed=3))
    assert [t.task.seed for t in trajectories] == [t.seed for t in tasks]
    assert all(t.status in ("ok", "truncated") for t in trajectories)
    assert len(policy.starts) >= 3
    for turn, starts in policy.starts.items():
        assert max(starts) - min(starts) < 0.02, f"turn {turn} did not start together"
