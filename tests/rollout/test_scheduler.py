"""The scheduler with text policies: groups, redundancy, queue order, faults, backpressure, staleness."""

from __future__ import annotations

import asyncio
import threading

import pytest

import agentgym
from agentgym import Task, TaskSet
from agentgym.episode import Timeouts
from agentgym.policies import TextPolicy
from agentgym.rollout import RolloutConfig, RolloutScheduler, iterate_rollouts
from tests.rollout.envs import FlakyEnv, SlowOracle, VersionClock, VersionedPolicy
from tests.waiting import until_async


@pytest.fixture
def flaky():
    spec = agentgym.register("test/Flaky-v0", "tests.rollout.envs:FlakyEnv")
    yield spec.id
    from agentgym import registration

    registration._registry.pop(spec.id, None)


async def _collect(scheduler: RolloutScheduler, tasks) -> tuple[list, list]:
    """Run the scheduler and read its stream: every trajectory, and every complete group."""
    seen, groups = [], []

    async def read() -> None:
        async for group in scheduler.stream.groups():
            groups.append(group)

    stream_reader = scheduler.stream
    original_next = stream_reader._next

    async def spy():
        item = await original_next()
        if isinstance(item, agentgym.Trajectory):
            seen.append(item)
        return item

    stream_reader._next = spy
    async with asyncio.TaskGroup() as group:
        group.create_task(read())
        await scheduler.run(tasks)
    return seen, groups


def test_groups_keep_the_first_finishers_and_cancel_the_rest(registered_counter):
    tasks = TaskSet.generate("test/Counter-v0", 6)
    config = RolloutConfig(concurrency=8, group_size=3, redundancy=2, seed=1)
    scheduler = RolloutScheduler("test/Counter-v0", SlowOracle(), config)
    _seen, groups = asyncio.run(_collect(scheduler, tasks))
    m = scheduler.metrics
    assert len(groups) == 6 and all(len(g) == 3 for g in groups)
    assert {g[0].task.seed for g in groups} == {t.seed for t in tasks}
    assert all(len({t.task.seed for t in g}) == 1 for g in groups)
    assert m.finished == 18 and m.groups_complete == 6 and m.errored == 0
    assert m.started == 18 + m.cancelled and m.accounted
    assert m.cancelled > 0  # the spares were stopped once three of a group had finished


class RandomAdder(TextPolicy):
    name = "random-adder"

    async def act(self, env, messages, rng):
        return env.format_call("add", amount=int(rng.integers(1, 4)))


def test_samples_of_a_group_differ_and_reruns_repeat(registered_counter):
    tasks = [Task(env_id="test/Counter-v0", seed=3)]

    def actions(seed: int) -> list[list[str]]:
        config = RolloutConfig(group_size=4, seed=seed)
        scheduler = RolloutScheduler("test/Counter-v0", RandomAdder(), config)
        _, groups = asyncio.run(_collect(scheduler, tasks))
        return sorted([t.action for t in traj.turns] for traj in groups[0])

    first = actions(0)
    assert len({str(a) for a in first}) > 1  # four samples, not four copies
    assert actions(0) == first and actions(1) != first


def test_finished_trajectories_stream_at_once_not_in_task_order(registered_counter):
    class FirstTaskLast(TextPolicy):
        """The oracle, but the first task's episode acts only once the three others have finished."""

        name = "first-task-last"

        async def act(self, env, messages, rng):
            if env.np_random_seed == 0:
                await until_async(lambda: scheduler.metrics.finished == 3, "the three other episodes finishing")
            return env.oracle_action()

    tasks = TaskSet.generate("test/Counter-v0", 4)
    scheduler = RolloutScheduler("test/Counter-v0", FirstTaskLast(), RolloutConfig(concurrency=4))
    seen, _ = asyncio.run(asyncio.wait_for(_collect(scheduler, tasks), timeout=60))
    assert [t.task.seed for t in seen][-1] == 0 and len(seen) == 4


def test_faulty_environments_are_counted_and_healthy_ones_unaffected(flaky):
    tasks = TaskSet.generate("test/Flaky-v0", 20)
    config = RolloutConfig(concurrency=20, max_retries=0, timeouts=Timeouts(episode=20, turn=6, tool=3))
    scheduler = RolloutScheduler("test/Flaky-v0", agentgym.OraclePolicy(), config)
    seen, groups = asyncio.run(asyncio.wait_for(_collect(scheduler, tasks), timeout=30))
    by_kind = {}
    for t in seen:
        by_kind.setdefault(t.task.seed % 5, []).append(t)
    assert all(t.status == "ok" and t.success for k in (0, 4) for t in by_kind[k])
    assert {t.info["error_cause"] for t in by_kind[1]} == {"env:RuntimeError"}
    assert {t.info["error_cause"] for t in by_kind[2]} == {"timeout:tool"}
    assert {t.info["error_cause"] for t in by_kind[3]} == {"env:ConnectionError"}
    assert all("worker process died" in t.error for t in by_kind[3])
    m = scheduler.metrics
    assert (m.started, m.finished, m.errored) == (20, 8, 12) and m.accounted
    assert m.error_causes == {"env:RuntimeError": 4, "timeout:tool": 4, "env:ConnectionError": 4}
    assert len(groups) == 8 and m.groups_failed == 12


def test_every_environment_is_closed_through_aclose_on_the_loop(flaky, monkeypatch):
    """Failed instances are closed when given back, healthy ones when the rollout ends; both awaited."""
    closed = []
    original = FlakyEnv.aclose

    async def aclose(self: FlakyEnv) -> None:
        await asyncio.sleep(0)
        closed.append(self)
        await original(self)

    monkeypatch.setattr(FlakyEnv, "aclose", aclose)
    config = RolloutConfig(concurrency=5, max_retries=0, timeouts=Timeouts(episode=20, turn=6, tool=3))
    scheduler = RolloutScheduler("test/Flaky-v0", agentgym.OraclePolicy(), config)
    asyncio.run(asyncio.wait_for(_collect(scheduler, TaskSet.generate("test/Flaky-v0", 10)), timeout=30))
    assert len({id(env) for env in closed}) == len(closed) == scheduler.runner.runners["test/Flaky-v0"].created > 5


def test_errors_are_retried_within_the_budget(flaky):
    tasks = TaskSet.generate("test/Flaky-v0", 5)
    config = RolloutConfig(concurrency=5, max_retries=2, timeouts=Timeouts(episode=20, turn=6, tool=2))
    scheduler = RolloutScheduler("test/Flaky-v0", agentgym.OraclePolicy(), config)
    asyncio.run(_collect(scheduler, tasks))
    m = scheduler.metrics
    assert m.retried == 6 and m.errored == 9 and m.finished == 2 and m.accounted


def test_a_slow_reader_holds_producers_back(registered_counter):
    tasks = TaskSet.generate("test/Counter-v0", 30)
    scheduler = RolloutScheduler("test/Counter-v0", agentgym.OraclePolicy(), RolloutConfig(concurrency=8, stream_size=2))
    sizes = []

    async def main() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(scheduler.run(tasks))
            async for _ in scheduler.stream:
                sizes.append(scheduler.stream.qsize())
                await asyncio.sleep(0.005)

    asyncio.run(main())
    assert len(sizes) == 30 and max(sizes) <= 2 and scheduler.metrics.accounted


def test_plain_iterator_yields_and_stops_early(registered_counter):
    tasks = TaskSet.generate("test/Counter-v0", 10_000)
    got = []
    for trajectory in iterate_rollouts("test/Counter-v0", SlowOracle(0.01), tasks, RolloutConfig(concurrency=4)):
        got.append(trajectory)
        if len(got) == 5:
            break
    assert len(got) == 5 and all(t.success for t in got)
    assert not [t for t in threading.enumerate() if t.name == "agentgym-rollout"]  # the rollout thread is gone
    everything = list(iterate_rollouts("test/Counter-v0", agentgym.OraclePolicy(), tasks[:7]))
    assert sorted(t.task.seed for t in everything) == [t.seed for t in tasks[:7]]


def test_staleness_bound_limits_starts_and_drops_old_trajectories(registered_counter):
    clock = VersionClock()
    tasks = TaskSet.generate("test/Counter-v0", 40)
    config = RolloutConfig(concurrency=16, max_staleness=1, batch_size=4, max_retries=10)
    scheduler = RolloutScheduler("test/Counter-v0", VersionedPolicy(clock), config, engine=clock)
    admitted_at_version: dict[int, int] = {}

    async def trainer() -> None:
        while scheduler.metrics.finished + scheduler.metrics.dropped < len(tasks):
            await asyncio.sleep(0.1)
            m = scheduler.metrics
            admitted_at_version[clock.version] = m.started - m.dropped - m.errored - m.cancelled
            clock.version += 1
            scheduler.notify()

    async def main() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(trainer())
            group.create_task(_collect(scheduler, tasks))

    asyncio.run(asyncio.wait_for(main(), timeout=60))
    m = scheduler.metrics
    assert all(admitted <= (version + 2) * 4 for version, admitted in admitted_at_version.items())
    assert m.dropped > 0 and m.finished == 40 and m.accounted
    assert max(m.staleness) <= 1


def test_garbage_collection_is_relaxed_during_a_rollout_and_restored_after(registered_counter):
    import gc

    before = gc.get_threshold()
    seen_inside = []

    class Probe(TextPolicy):
        name = "probe"

        async def act(self, env, messages, rng):
            seen_inside.append((gc.get_threshold(), gc.get_freeze_count()))
            return env.oracle_action()

    for relax in (True, False):
        scheduler = RolloutScheduler("test/Counter-v0", Probe(), RolloutConfig(relax_gc=relax))
        asyncio.run(_collect(scheduler, TaskSet.generate("test/Counter-v0", 3)))
    relaxed, plain = seen_inside[0], seen_inside[-1]
    assert relaxed[0][0] >= 50_000 and relaxed[1] > 0
    assert plain == (before, 0)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
