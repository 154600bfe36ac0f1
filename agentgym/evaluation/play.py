"""Playing a policy on tasks through the asynchronous rollout: the shared core of every evaluation, and the
in-memory :func:`evaluate` of one environment (what the trainer's held-out checks use)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from agentgym.episode import Timeouts
from agentgym.evaluation.scores import mean
from agentgym.policies import Policy
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.metrics import RolloutMetrics
from agentgym.rollout.runner import Backend, EnvKwargs
from agentgym.rollout.scheduler import GroupResult, RolloutScheduler
from agentgym.rollout.stream import TrajectoryStream
from agentgym.tasks import Task, TaskSet
from agentgym.trajectory import Trajectory


class EvalSummary(BaseModel):
    """The scores of one policy on one environment. Infrastructure errors are counted apart and
    left out of ``success_rate``, ``mean_reward`` and ``mean_turns`` (None when nothing was scored)."""

    env_id: str
    policy: str
    episodes: int
    success_rate: float | None
    mean_reward: float | None
    mean_turns: float | None
    truncated: int
    infra_errors: int
    wall_seconds: float

    @classmethod
    def of(cls, env_id: str, policy: str, trajectories: list[Trajectory], wall_seconds: float) -> EvalSummary:
        scored = [t for t in trajectories if t.status != "error"]
        return cls(
            env_id=env_id,
            policy=policy,
            episodes=len(trajectories),
            success_rate=mean(t.success for t in scored),
            mean_reward=mean(t.reward for t in scored),
            mean_turns=mean(t.num_turns for t in scored),
            truncated=sum(t.status == "truncated" for t in scored),
            infra_errors=len(trajectories) - len(scored),
            wall_seconds=wall_seconds,
        )


class EvalResult(BaseModel):
    """A summary, the trajectories behind it in task order, and how the rollout went."""

    summary: EvalSummary
    trajectories: list[Trajectory]
    metrics: RolloutMetrics | None = None


Settle = Callable[[int, Trajectory, list[Trajectory]], None]
"""Hears of a task's final trajectory: its index, the trajectory, and the attempts that failed on infrastructure."""

Sample = tuple[Trajectory, list[Trajectory]]
"""One sample of a group: its final trajectory and the attempts lost to infrastructure recorded with it."""


async def play_tasks(
    env: str | EnvKwargs,
    policy: Policy,
    tasks: Sequence[Task],
    config: RolloutConfig,
    settle: Settle,
    *,
    indices: Sequence[int] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    backend: Backend | None = None,
) -> RolloutMetrics:
    """Play every task once through the asynchronous rollout. An episode that fails on infrastructure
    is played again while ``config.max_retries`` lasts; the last attempt is the task's final trajectory.
    ``indices`` (default 0, 1, ...) name the tasks and seed the policy (see :class:`RolloutScheduler`);
    ``backend`` says where the episodes play (default: here). ``env`` is an environment id (made with
    ``env_kwargs``) or several ids with their keyword arguments, played at once."""

    def on_group(group: GroupResult) -> None:
        for final, failed in group_samples(group, 1):
            settle(group.index, final, failed)

    return await play_groups(env, policy, tasks, config, on_group, indices=indices, env_kwargs=env_kwargs,
                             backend=backend)


async def play_groups(
    env: str | EnvKwargs,
    policy: Policy,
    tasks: Sequence[Task],
    config: RolloutConfig,
    on_group: Callable[[GroupResult], None],
    *,
    indices: Sequence[int] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    backend: Backend | None = None,
) -> RolloutMetrics:
    """Play each task's group of ``config.group_size`` episodes, drawn as ``config.sampling`` says (under
    ``latr`` as one tree plus stochastic refills: the scheduler's group machinery, as in training), and tell
    ``on_group`` of each group as it closes; :func:`group_samples` puts a group's episodes in sample order.
    The other arguments are :func:`play_tasks`'s."""

    def closed(group: GroupResult) -> None:
        if group.kept or group.errors:  # a group whose episodes were all cancelled has nothing to report
            on_group(group)

    scheduler = RolloutScheduler(env, policy, config, env_kwargs=env_kwargs, on_group=closed, backend=backend)
    async with asyncio.TaskGroup() as group:
        group.create_task(_drain(scheduler.stream))
        return await scheduler.run(tasks, indices=indices)


def group_samples(group: GroupResult, samples: int) -> list[Sample]:
    """A closed group's episodes as samples 0, 1, ...: the kept ones in :func:`sample_order` (under ``latr`` the
    tree's root first, then its other branches by id, then the stochastic refills), then, for each sample that
    no kept episode filled, the last of the attempts lost to infrastructure. The other lost attempts are recorded
    with the first sample not grown in the tree (the one played in their place), else with the last sample."""
    kept = sorted(group.kept, key=sample_order)[:samples]
    errors = sorted(group.errors, key=sample_order)
    unfilled = min(samples - len(kept), len(errors))
    finals = kept + errors[len(errors) - unfilled:]
    failed = errors[: len(errors) - unfilled]
    chosen: list[Sample] = [(final, []) for final in finals]
    if failed and chosen:
        refill = next((s for s, t in enumerate(finals) if "branch" not in t.info), len(chosen) - 1)
        chosen[refill][1].extend(failed)
    return chosen


def sample_order(trajectory: Trajectory) -> tuple[int, tuple[int, ...]]:
    """Where an episode of a group comes among its samples: a tree's branches by id (the root is branch 0),
    then the episodes played on their own by the seed the scheduler gave them (which counts their starts)."""
    branch = trajectory.info.get("branch")
    if branch is not None:
        return 0, (int(branch),)
    return 1, tuple(int(s) for s in trajectory.info.get("seed") or ())


async def evaluate(
    env_id: str,
    policy: Policy,
    tasks: TaskSet,
    *,
    concurrency: int = 8,
    seed: int = 0,
    timeouts: Timeouts | None = None,
    max_retries: int = 1,
    env_kwargs: dict[str, Any] | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
    backend: Backend | None = None,
) -> EvalResult:
    """Play every task once, ``concurrency`` episodes at a time, and keep the results in memory.

    An episode that fails on infrastructure is played again up to ``max_retries`` times; a task that
    never succeeds keeps its last error. ``on_episode`` hears of each task's final trajectory; ``backend``
    says where the episodes play (default: here).
    """
    config = RolloutConfig(concurrency=concurrency, seed=seed, max_retries=max_retries, timeouts=timeouts or Timeouts())
    results: list[Trajectory | None] = [None] * len(tasks)

    def settle(index: int, final: Trajectory, failed: list[Trajectory]) -> None:
        results[index] = final
        if on_episode is not None:
            on_episode(final)

    metrics = await play_tasks(env_id, policy, tasks, config, settle, env_kwargs=env_kwargs, backend=backend)
    trajectories = [t for t in results if t is not None]
    summary = EvalSummary.of(env_id, policy.name, trajectories, metrics.wall_seconds)
    return EvalResult(summary=summary, trajectories=trajectories, metrics=metrics)


async def _drain(stream: TrajectoryStream) -> None:
    """Evaluation reads results per group; the stream itself is only emptied."""
    async for _ in stream:
        pass
