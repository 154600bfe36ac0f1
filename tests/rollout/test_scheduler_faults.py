"""Faults the chaos benchmark (``benchmarks/perf/chaos.py``) found in the rollout: none may stop the rollout,
lose or misfile a trajectory, or hold up the other episodes."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from typing import Any, ClassVar

import pytest

import agentgym
from agentgym import Env, Message, TaskSet, tool
from agentgym.episode import Timeouts
from agentgym.policies import OraclePolicy, TextPolicy
from agentgym.rollout import RolloutConfig, RolloutScheduler, iterate_rollouts
from tests.conftest import CounterEnv
from tests.rollout.streams import delivered
from tests.waiting import until

ENV_ID = "test/Counter-v0"


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
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, tasks), timeout=30))
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
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, TaskSet.generate(ENV_ID, 6)), timeout=30))
    assert len(seen) == 6 and all(t.status == "error" for t in seen)
    assert {t.info["error_cause"] for t in seen} == {"record:ValueError"}
    _assert_adds_up(scheduler, seen, 6)


class FailsAtFirstTurnSometimes(TextPolicy):
    """The oracle after a short think, except that about half the episodes fail at once."""

    name = "fails-at-first-turn"

    async def act(self, env, messages, rng):
        if len(messages) == 1 and rng.integers(2) == 0:
            raise RuntimeError("the engine refused the request")
        await asyncio.sleep(0.05)
        return env.oracle_action()


def test_closes_that_raise_are_counted_and_lose_nothing(registered_counter, monkeypatch):
    async def aclose(self: CounterEnv) -> None:
        CounterEnv.close(self)
        raise RuntimeError("the sandbox was already gone")

    monkeypatch.setattr(CounterEnv, "aclose", aclose)
    tasks = TaskSet.generate(ENV_ID, 20)
    scheduler = RolloutScheduler(ENV_ID, FailsAtFirstTurnSometimes(), RolloutConfig(concurrency=8, max_retries=0))
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, tasks), timeout=30))
    assert len(seen) == 20 and 0 < scheduler.metrics.errored < 20
    assert scheduler.metrics.close_errors == scheduler.runner.runners[ENV_ID].created
    _assert_adds_up(scheduler, seen, 20)


def test_the_plain_iterator_ends_when_closing_the_idle_environments_fails(registered_counter, monkeypatch):
    async def aclose(self: CounterEnv) -> None:
        raise RuntimeError("the sandbox was already gone")

    monkeypatch.setattr(CounterEnv, "aclose", aclose)
    got = []
    consumer = threading.Thread(
        target=lambda: got.extend(iterate_rollouts(ENV_ID, OraclePolicy(), TaskSet.generate(ENV_ID, 5))), daemon=True
    )
    consumer.start()
    consumer.join(timeout=20)
    assert not consumer.is_alive(), "the stream was never closed"
    assert len(got) == 5


def test_an_environment_given_back_is_closed_in_full_even_when_its_episode_is_cancelled(registered_counter, monkeypatch):
    """A spare that finishes first cancels the slot whose episode failed; that slot's close goes on."""
    closes = {"done": 0, "cut": 0}

    async def aclose(self: CounterEnv) -> None:
        try:
            await asyncio.sleep(0.3)
        except asyncio.CancelledError:
            closes["cut"] += 1
            raise
        closes["done"] += 1

    monkeypatch.setattr(CounterEnv, "aclose", aclose)
    config = RolloutConfig(concurrency=16, group_size=1, redundancy=1, max_retries=0)
    scheduler = RolloutScheduler(ENV_ID, FailsAtFirstTurnSometimes(), config)
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, TaskSet.generate(ENV_ID, 20)), timeout=30))
    assert closes == {"done": scheduler.runner.runners[ENV_ID].created, "cut": 0}
    assert scheduler.metrics.errored > 0
    _assert_adds_up(scheduler, seen, 20)


def test_a_close_that_hangs_is_given_up_after_the_episode_time_limit(registered_counter, monkeypatch):
    async def aclose(self: CounterEnv) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(CounterEnv, "aclose", aclose)
    config = RolloutConfig(concurrency=4, timeouts=Timeouts(episode=0.5, turn=0.5, tool=0.5))
    scheduler = RolloutScheduler(ENV_ID, OraclePolicy(), config)
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, TaskSet.generate(ENV_ID, 4)), timeout=60))
    assert len(seen) == 4 and all(t.status == "ok" for t in seen)
    assert scheduler.metrics.close_errors == scheduler.runner.runners[ENV_ID].created


def test_a_group_stays_open_until_all_its_episodes_have_started(registered_counter):
    """With fewer slots than a group has episodes, its first finisher must not close it as failed."""
    config = RolloutConfig(concurrency=1, group_size=2, redundancy=1)
    scheduler = RolloutScheduler(ENV_ID, OraclePolicy(), config)
    groups = []

    async def main() -> None:
        async def read() -> None:
            async for group in scheduler.stream.groups():
                groups.append(group)

        async with asyncio.TaskGroup() as tasks_group:
            tasks_group.create_task(read())
            await scheduler.run(TaskSet.generate(ENV_ID, 3))

    asyncio.run(asyncio.wait_for(main(), timeout=30))
    assert sorted(len(g) for g in groups) == [2, 2, 2]
    m = scheduler.metrics
    assert (m.groups_complete, m.groups_failed, m.finished) == (3, 0, 6)


def test_stopping_closes_every_group_that_was_handed_out(registered_counter):
    handed_out = []

    def tasks():
        for task in TaskSet.generate(ENV_ID, 10_000):
            handed_out.append(task)
            yield task

    closed = []
    scheduler = RolloutScheduler(ENV_ID, OraclePolicy(), RolloutConfig(concurrency=1), on_group=closed.append)

    async def main() -> None:
        async def read() -> None:
            seen = 0
            async for _ in scheduler.stream:
                seen += 1
                if seen == 5:
                    scheduler.stop()

        async with asyncio.TaskGroup() as tasks_group:
            tasks_group.create_task(read())
            await scheduler.run(tasks())

    asyncio.run(asyncio.wait_for(main(), timeout=30))
    m = scheduler.metrics
    assert sorted(g.index for g in closed) == list(range(len(handed_out)))
    assert m.groups_complete + m.groups_failed == len(handed_out) and m.accounted


class StuckPinnedEnv(Env):
    """Runs its hooks on a thread of its own; the tool of the episode with seed 0 is stuck until :attr:`released`
    is set (at most 60 s), and notes in :attr:`freed` whether it was."""

    execution = "pinned"
    released: ClassVar[threading.Event]
    freed: ClassVar[list[bool]]

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        return [Message(role="user", content="Call go.")]

    @tool
    def go(self) -> str:
        """Do the work."""
        if self.np_random_seed == 0:
            self.freed.append(self.released.wait(timeout=60))
        self.finish(success=True)
        return "done"

    def oracle_action(self) -> str:
        return self.format_call("go")


@pytest.fixture
def stuck_pinned(monkeypatch):
    monkeypatch.setattr(StuckPinnedEnv, "released", threading.Event(), raising=False)
    monkeypatch.setattr(StuckPinnedEnv, "freed", [], raising=False)
    spec = agentgym.register("test/StuckPinned-v0", "tests.rollout.test_scheduler_faults:StuckPinnedEnv")
    yield spec.id
    StuckPinnedEnv.released.set()
    from agentgym import registration

    registration._registry.pop(spec.id, None)


def test_closing_an_environment_whose_step_is_stuck_never_blocks_the_event_loop(stuck_pinned):
    """The stuck episode times out; closing its environment must not wait on its thread, on the loop that
    every other episode's timers run on: the rollout ends while the step is still stuck, released only after it."""
    config = RolloutConfig(concurrency=4, max_retries=0, timeouts=Timeouts(episode=5, turn=0.5, tool=0.3))
    scheduler = RolloutScheduler(stuck_pinned, OraclePolicy(), config)
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, TaskSet.generate(stuck_pinned, 4)), timeout=60))
    StuckPinnedEnv.released.set()
    until(lambda: StuckPinnedEnv.freed, "the stuck step returning")
    assert sorted(t.info.get("error_cause", t.status) for t in seen) == ["ok", "ok", "ok", "timeout:tool"]
    assert StuckPinnedEnv.freed == [True], "the rollout waited for the stuck step's thread (it ran out its 60 s)"


class SecondEpisodeOfFirstTaskFails(TextPolicy):
    """The oracle, but the second episode of the task of seed 0 loses its inference server."""

    name = "second-fails"

    def __init__(self) -> None:
        super().__init__()
        self.first_task_episodes = 0

    async def act(self, env, messages, rng):
        if env.np_random_seed == 0 and not any(m.role == "assistant" for m in messages):
            self.first_task_episodes += 1
            if self.first_task_episodes == 2:
                raise ConnectionError("the inference server went away")
        return env.oracle_action()


class Weights:
    """What the scheduler reads of a versioned engine: the version of the weights it serves."""

    version = 0


def test_members_kept_by_a_failed_group_do_not_use_up_the_staleness_budget(registered_counter):
    """A trainer never receives a failed group's kept members; counting them as kept forever shrank the budget
    until, on-policy (staleness 0), no batch could fill and the rollout waited for ever."""
    weights = Weights()  # the trainer publishes a version per complete group
    config = RolloutConfig(concurrency=4, group_size=2, max_retries=0, max_staleness=0, batch_size=2)
    scheduler = RolloutScheduler(ENV_ID, SecondEpisodeOfFirstTaskFails(), config, engine=weights)

    async def main() -> None:
        async def train() -> None:
            async for group in scheduler.stream.closed_groups():
                if group.complete:
                    weights.version += 1
                    scheduler.notify()

        async with asyncio.TaskGroup() as tasks_group:
            tasks_group.create_task(train())
            await scheduler.run(TaskSet.generate(ENV_ID, 3))

    asyncio.run(asyncio.wait_for(main(), timeout=30))
    m = scheduler.metrics
    assert (m.groups_complete, m.groups_failed, weights.version) == (2, 1, 2)


def test_a_failing_group_callback_stops_the_rollout_with_its_error_and_starts_nothing_more(registered_counter):
    """The attempt whose close raises wakes the scheduler as the task group cancels it; the scheduler once took
    the wake-up for room to start another attempt (``asyncio.wait_for`` swallowed the cancellation), which the
    shutting-down group refused, leaving an attempt coroutine that was never awaited."""
    tasks = TaskSet.generate(ENV_ID, 6)

    def broken(result: Any) -> None:
        raise ValueError("the caller's group handler broke")

    scheduler = RolloutScheduler(ENV_ID, OraclePolicy(), RolloutConfig(concurrency=1, group_size=1), on_group=broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ExceptionGroup) as raised:
            asyncio.run(asyncio.wait_for(delivered(scheduler, tasks), timeout=30))
        gc.collect()
    assert [str(e) for e in _leaves(raised.value)] == ["the caller's group handler broke"]
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert scheduler.metrics.started == 1


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    return [leaf for e in group.exceptions for leaf in (_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])]
