"""The synchronous baseline really is lockstep: every turn of a batch starts together."""

from __future__ import annotations

import asyncio

from agentgym import TaskSet
from agentgym.policies import TextPolicy
from agentgym.rollout.synchronous import run_lockstep


class LoggedAdder(TextPolicy):
    """Adds 1 per turn after a random pause, logging when each of its turns began and ended."""

    name = "logged"

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []

    async def act(self, env, messages, rng):
        self.log.append(("began", env.turn))
        await asyncio.sleep(float(rng.uniform(0, 0.05)))
        self.log.append(("ended", env.turn))
        return env.format_call("add", amount=1)


def test_every_turn_of_the_batch_waits_for_the_slowest(registered_counter):
    policy = LoggedAdder()
    tasks = list(TaskSet.generate("test/Counter-v0", 6))
    trajectories = asyncio.run(run_lockstep("test/Counter-v0", policy, tasks, seed=3))
    assert [t.task.seed for t in trajectories] == [t.seed for t in tasks]
    assert all(t.status in ("ok", "truncated") for t in trajectories)
    turns = sorted({turn for _, turn in policy.log})
    assert len(turns) >= 3
    for turn in turns[1:]:  # no episode begins a turn before every episode ended the one before
        first_began = policy.log.index(("began", turn))
        last_ended = max(i for i, event in enumerate(policy.log) if event == ("ended", turn - 1))
        assert last_ended < first_began, f"turn {turn} began before turn {turn - 1} had ended everywhere"
