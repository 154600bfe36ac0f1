"""Carry-over (APRIL): a complete group's spares pause at a turn boundary and resume in a carry group once the
policy version advanced, or go straight on in it (``carry_over_resume: at_once``)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from agentgym import TaskSet
from agentgym.cluster.config import BackendConfig
from agentgym.episode import Timeouts
from agentgym.rollout import GroupId, RolloutConfig, RolloutScheduler
from agentgym.rollout.scheduler import GroupResult
from tests.rollout.envs import VersionClock, VersionedPolicy
from tests.rollout.streams import delivered
from tests.waiting import until_async

ENV = "test/Counter-v0"


class _Paced(VersionedPolicy):
    """A task's first ``fast`` episodes think ``quick`` seconds a turn and later ones ``slow``, so a group's spares
    are still playing when it completes."""

    def __init__(self, clock: VersionClock, *, fast: int = 2, quick: float = 0.005, slow: float = 0.03) -> None:
        super().__init__(clock)
        self.fast, self.quick, self.slow = fast, quick, slow
        self.paces: Counter[int] = Counter()

    def pace(self, env) -> float:
        self.paces[env.np_random_seed] += 1  # the env has been reset: its seed is the task's
        return self.quick if self.paces[env.np_random_seed] <= self.fast else self.slow


def _scheduler(clock: VersionClock, config: RolloutConfig, on_group: Callable[[GroupResult], None] | None = None,
               **pace: float) -> RolloutScheduler:
    return RolloutScheduler(ENV, _Paced(clock, **pace), config, engine=clock, on_group=on_group)


def _carried(trajectories: list) -> list:
    """The trajectories that paused while carried over."""
    return [t for t in trajectories if t.timings.get("paused_seconds", 0.0) > 0]


async def _alongside(scheduler: RolloutScheduler, tasks, trainer: Coroutine[Any, Any, None],
                     into: list | None = None) -> list:
    """Run ``scheduler`` with ``trainer`` beside it; what the stream delivered (into ``into``, where given)."""
    async with asyncio.TaskGroup() as group:
        group.create_task(trainer)
        return await delivered(scheduler, tasks, into=into)


def test_spares_are_carried_into_carry_groups_and_counted_once(registered_counter):
    clock = VersionClock()
    groups: list[GroupResult] = []
    # at most 4 of the 8 slots paused: the rest keep playing, so nothing resumes for lack of room
    config = RolloutConfig(concurrency=8, group_size=2, redundancy=2, carry_over=True, carry_over_limit=4, seed=3)
    scheduler = _scheduler(clock, config, groups.append, slow=0.02)

    async def trainer() -> None:  # publishes new weights every 0.1 s until three carry groups came out whole
        while sum(len(g.kept) == 2 for g in groups if g.carry) < 3:
            await asyncio.sleep(0.1)
            clock.version += 1
            scheduler.notify()
        scheduler.stop()

    seen = asyncio.run(asyncio.wait_for(_alongside(scheduler, TaskSet.generate(ENV, 500), trainer()), timeout=60))
    m = scheduler.metrics
    assert m.accounted and m.errored == 0 and m.carry_buffer == 0
    assert len({id(t) for t in seen}) == len(seen) == m.finished
    assert len({tuple(t.info["seed"]) for t in seen}) == len(seen)  # no two episodes of a task share a seed
    carry_groups = [g for g in groups if g.carry]
    assert m.carried > 0 and m.carry_groups >= len(carry_groups) >= 3
    assert all(g.id == GroupId(g.index, 1) and g.index in {h.index for h in groups if not h.carry} for g in carry_groups)
    assert all(t.info["group"] == {"index": g.index, "size": 2, "carry": 1} and GroupId.of(t) == g.id
               for g in carry_groups for t in g.kept)
    assert sum(len(g.kept) == 2 for g in carry_groups) >= 3
    carried = _carried(seen)
    assert carried and len(carried) <= m.carried_kept
    assert all(t.info["group"]["carry"] == 1 for t in carried)
    assert all(len(set(t.versions)) >= 2 for t in carried)  # turns before the pause, and after the new weights
    tokens = [sum(t.loss_mask) for t in carried], [sum(t.loss_mask) for g in carry_groups for t in g.kept]
    assert sum(tokens[0]) <= m.carried_tokens <= sum(tokens[1])
    logged = m.log_dict()
    assert logged["rollout/carried"] == m.carried and logged["rollout/carry_groups"] == m.carry_groups
    assert logged["rollout/dropped_stale"] == m.dropped and logged["rollout/carry_paused_seconds"] > 0


def test_at_once_spares_go_straight_on_in_carry_groups_without_a_new_version(registered_counter):
    """``carry_over_resume: at_once``: the version never moves, yet every carried spare goes on at once in a carry
    group of its task, never pausing, and is counted once."""
    groups: list[GroupResult] = []
    config = RolloutConfig(concurrency=8, group_size=2, redundancy=2, carry_over=True, carry_over_resume="at_once",
                           seed=3)
    scheduler = _scheduler(VersionClock(), config, groups.append, slow=0.02)
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, TaskSet.generate(ENV, 12)), timeout=60))
    m = scheduler.metrics
    assert m.accounted and m.errored == 0 and m.carry_buffer == m.carry_buffer_peak == 0
    assert m.carried > 0 and m.carry_groups > 0 and m.carried_kept > 0 and m.carry_paused_seconds == 0
    assert not _carried(seen) and all(set(t.versions) <= {0} for t in seen)
    assert len({tuple(t.info["seed"]) for t in seen}) == len(seen) == m.finished
    carry_groups = [g for g in groups if g.carry]
    assert carry_groups and all(g.index in {h.index for h in groups if not h.carry} for g in carry_groups)


def test_without_carry_over_nothing_is_carried_or_logged(registered_counter):
    scheduler = _scheduler(VersionClock(), RolloutConfig(concurrency=8, group_size=2, redundancy=2))
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, TaskSet.generate(ENV, 3)), timeout=60))
    m = scheduler.metrics
    assert m.cancelled > 0 and m.carried == 0 and m.accounted and not _carried(seen)
    assert not [k for k in m.log_dict() if "carr" in k]


def test_the_buffer_bound_cancels_the_excess(registered_counter):
    clock = VersionClock()
    buffered: list[int] = []

    def step(group: GroupResult) -> None:
        buffered.append(scheduler.metrics.carry_buffer)
        clock.version += 1

    config = RolloutConfig(concurrency=8, group_size=2, redundancy=2, carry_over=True, carry_over_limit=1)
    scheduler = _scheduler(clock, config, step)
    asyncio.run(asyncio.wait_for(delivered(scheduler, TaskSet.generate(ENV, 4)), timeout=60))
    m = scheduler.metrics
    assert m.carried > 0 and m.cancelled > 0 and m.accounted
    assert max(buffered) == 1


async def _hold_then_bump(scheduler: RolloutScheduler, clock: VersionClock, hold: float, checks: list[tuple[int, int]],
                          seen: list) -> None:
    """Once something is carried over, keep the version for ``hold`` seconds (noting what is buffered and how many
    carry groups opened), bump it, and stop the rollout once the stream delivered a carried episode into ``seen``."""
    m = scheduler.metrics
    await until_async(lambda: m.carried, "an episode carried over")
    await asyncio.sleep(hold)
    checks.append((m.carry_buffer, m.carry_groups))
    clock.version += 1
    scheduler.notify()
    await until_async(lambda: _carried(seen), "a carried episode delivered")
    scheduler.stop()


def _hold(hold: float, timeouts: Timeouts) -> tuple[RolloutScheduler, list, list[tuple[int, int]]]:
    """A long rollout whose carried-over episodes wait ``hold`` seconds for a new version (the buffer bound leaves
    room to start others, so they never resume for lack of it)."""
    clock, checks, seen = VersionClock(), [], []
    config = RolloutConfig(concurrency=8, group_size=2, redundancy=2, carry_over=True, carry_over_limit=2,
                           timeouts=timeouts)
    scheduler = _scheduler(clock, config)
    run = _alongside(scheduler, TaskSet.generate(ENV, 500), _hold_then_bump(scheduler, clock, hold, checks, seen), seen)
    asyncio.run(asyncio.wait_for(run, timeout=60))
    return scheduler, seen, checks


def test_carried_episodes_resume_only_once_the_version_advanced(registered_counter):
    scheduler, seen, checks = _hold(0.3, Timeouts())
    assert checks[0][0] > 0 and checks[0][1] == 0  # still paused, no carry group, while the version stood
    carried = _carried(seen)
    assert carried and all(set(t.versions) == {0, 1} for t in carried)
    assert max(t.timings["paused_seconds"] for t in carried) >= 0.25
    assert scheduler.metrics.accounted


def test_a_pause_longer_than_the_episode_limit_is_not_timed_out(registered_counter):
    # the limits are some five times what an episode's six turns of 0.03 s take, so that only the pause passes them
    scheduler, seen, _ = _hold(1.2, Timeouts(episode=1.0, turn=0.5, tool=0.25))
    carried = _carried(seen)
    assert carried and all(t.status != "error" for t in carried) and scheduler.metrics.errored == 0
    longest = max(carried, key=lambda t: t.timings["paused_seconds"])
    assert longest.timings["paused_seconds"] > 1.0 and longest.status in ("ok", "truncated")
    assert scheduler.metrics.accounted


def test_stop_discards_what_is_buffered(registered_counter):
    clock = VersionClock()
    config = RolloutConfig(concurrency=8, group_size=2, redundancy=2, carry_over=True)
    scheduler = _scheduler(clock, config)
    buffered: list[int] = []

    async def stop_when_buffered() -> None:
        await until_async(lambda: scheduler.metrics.carry_buffer >= 2, "two episodes buffered")
        buffered.append(scheduler.metrics.carry_buffer)
        scheduler.stop()

    asyncio.run(asyncio.wait_for(_alongside(scheduler, TaskSet.generate(ENV, 50), stop_when_buffered()), timeout=60))
    m = scheduler.metrics
    assert m.carry_discarded >= buffered[0] >= 2 and m.cancelled >= m.carry_discarded
    assert m.carry_buffer == 0 and m.carried_kept == 0 and m.accounted


def test_a_carried_episode_older_than_the_staleness_bound_is_dropped(registered_counter):
    clock = VersionClock()

    def leap(group: GroupResult) -> None:  # three weight updates while the spares of g0 are paused
        if not group.carry:
            clock.version += 3

    config = RolloutConfig(group_size=2, redundancy=2, carry_over=True, max_staleness=1)
    scheduler = _scheduler(clock, config, leap)
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, TaskSet.generate(ENV, 1)), timeout=60))
    m = scheduler.metrics
    assert m.carried == 2 and m.carry_groups == 1 and m.carried_kept == 0
    assert m.dropped >= 2 and m.retried >= 2 and m.accounted
    assert not _carried(seen)
    assert sorted(GroupId.of(t) for t in seen) == [GroupId(0), GroupId(0), GroupId(0, 1), GroupId(0, 1)]


def test_carry_over_needs_the_local_backend():
    with pytest.raises(ValueError, match="carry_over:"):
        BackendConfig(backend="ray", carry_over=True)
    assert BackendConfig(carry_over=True).carry_over
