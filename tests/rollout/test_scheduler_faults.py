"""Faults the chaos benchmark (``benchmarks/perf/chaos.py``) found in the rollout: none may stop the rollout,
lose or misfile a trajectory, or hold up the other episodes."""

from __future__ import annotations

import asyncio

from agentgym import TaskSet
from agentgym.policies import TextPolicy
from agentgym.rollout import RolloutConfig, RolloutScheduler

ENV_ID = "test/Counter-v0"


async def _play(scheduler: RolloutScheduler, tasks) -> list:
    """Run the scheduler to its end and return every trajectory its stream delivered."""
    seen = []

    async def read() -> None:
        async for trajectory in scheduler.stream:
            seen.append(trajectory)

    async with asyncio.TaskGroup() as group:
        group.create_task(read())
        await scheduler.run(tasks)
    return seen


def _assert_adds_up(scheduler: RolloutScheduler, seen: list, groups: int) -> None:
    m = scheduler.metrics
    assert m.accounted
    assert len(seen) == m.finished + m.errored
    assert sum(t.status == "error" for t in seen) == m.errored
    assert m.groups_complete + m.groups_failed == groups


class StartFails(TextPolicy):
    """The oracle, but starting about a third of the episodes raises (a tokenizer or a client that broke)."""

    name = "start-fails"

    def start(self, env, rng):
        if rng.integers(3) == 0:
            raise RuntimeError("the policy's client is gone")
        return super().start(env, rng)

    async def act(self, env, messages, rng):
        return env.oracle_action()


def test_a_policy_that_fails_to_start_gives_an_error_trajectory_not_a_failed_rollout(registered_counter):
    tasks = TaskSet.generate(ENV_ID, 30)
    scheduler = RolloutScheduler(ENV_ID, StartFails(), RolloutConfig(concurrency=8, max_retries=0))
    seen = asyncio.run(asyncio.wait_for(_play(scheduler, tasks), timeout=30))
    errors = [t for t in seen if t.status == "error"]
    assert errors and len(seen) == 30
    assert {t.info["error_cause"] for t in errors} == {"policy:RuntimeError"}
    assert all("the policy's client is gone" in t.error for t in errors)
    _assert_adds_up(scheduler, seen, 30)


class RecordFails(TextPolicy):
    """The oracle, whose sessions fail to write their record into every trajectory."""

    name = "record-fails"

    def start(self, env, rng):
        session = super().start(env, rng)

        def record(trajectory):
            raise ValueError("the token record is inconsistent")

        session.record = record
        return session

    async def act(self, env, messages, rng):
        return env.oracle_action()


def test_a_session_that_fails_to_record_marks_its_trajectory_as_an_error(registered_counter):
    scheduler = RolloutScheduler(ENV_ID, RecordFails(), RolloutConfig(concurrency=4, max_retries=0))
    seen = asyncio.run(asyncio.wait_for(_play(scheduler, TaskSet.generate(ENV_ID, 6)), timeout=30))
    assert len(seen) == 6 and all(t.status == "error" for t in seen)
    assert {t.info["error_cause"] for t in seen} == {"record:ValueError"}
    _assert_adds_up(scheduler, seen, 6)
