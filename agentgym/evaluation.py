"""Evaluation of a policy on a task set: episodes run concurrently, results summarised and saved."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentgym.episode import Timeouts
from agentgym.policies import Policy
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.metrics import RolloutMetrics
from agentgym.rollout.scheduler import GroupResult, RolloutScheduler
from agentgym.rollout.stream import TrajectoryStream
from agentgym.tasks import TaskSet
from agentgym.trajectory import Trajectory


class EvalSummary(BaseModel):
    """The scores of one policy on one environment. Infrastructure errors are counted apart and
    left out of ``success_rate``, ``mean_reward`` and ``mean_turns``."""

    env_id: str
    policy: str
    episodes: int
    success_rate: float
    mean_reward: float
    mean_turns: float
    truncated: int
    infra_errors: int
    wall_seconds: float

    @classmethod
    def of(cls, env_id: str, policy: str, trajectories: list[Trajectory], wall_seconds: float) -> EvalSummary:
        scored = [t for t in trajectories if t.status != "error"]
        n = max(len(scored), 1)
        return cls(
            env_id=env_id,
            policy=policy,
            episodes=len(trajectories),
            success_rate=sum(t.success for t in scored) / n,
            mean_reward=sum(t.reward for t in scored) / n,
            mean_turns=sum(t.num_turns for t in scored) / n,
            truncated=sum(t.status == "truncated" for t in scored),
            infra_errors=len(trajectories) - len(scored),
            wall_seconds=wall_seconds,
        )


class EvalResult(BaseModel):
    """A summary, the trajectories behind it in task order, and how the rollout went."""

    summary: EvalSummary
    trajectories: list[Trajectory]
    metrics: RolloutMetrics | None = None

    def save(self, out_dir: str | Path) -> Path:
        """Write ``<env>__<policy>.json`` (the summary) and ``.jsonl`` (one trajectory a line); return the JSON path."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{self.summary.env_id.replace('/', '__')}__{self.summary.policy}"
        episodes = [_episode_record(t) for t in self.trajectories]
        path = out / f"{stem}.json"
        path.write_text(EvalFile(summary=self.summary, rollout=self.metrics, episodes=episodes).model_dump_json(indent=2))
        (out / f"{stem}.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in self.trajectories))
        return path


class EvalFile(BaseModel):
    """The saved form of an evaluation: the summary, how the rollout went, and one short record per episode."""

    summary: EvalSummary
    rollout: RolloutMetrics | None = None
    episodes: list[dict[str, Any]]


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
) -> EvalResult:
    """Play every task once through the asynchronous rollout, ``concurrency`` episodes at a time.

    An episode that fails on infrastructure is played again up to ``max_retries`` times; a task that
    never succeeds keeps its last error. ``on_episode`` hears of each task's final trajectory.
    """
    config = RolloutConfig(concurrency=concurrency, seed=seed, max_retries=max_retries, timeouts=timeouts or Timeouts())
    results: list[Trajectory | None] = [None] * len(tasks)

    def settle(group: GroupResult) -> None:
        if not group.kept and not group.errors:
            return  # every episode of the task was cancelled: there is nothing to report
        final = group.kept[0] if group.kept else group.errors[-1]
        results[group.index] = final
        if on_episode is not None:
            on_episode(final)

    scheduler = RolloutScheduler(env_id, policy, config, env_kwargs=env_kwargs, on_group=settle)
    async with asyncio.TaskGroup() as group:
        group.create_task(_drain(scheduler.stream))
        metrics = await scheduler.run(tasks)
    trajectories = [t for t in results if t is not None]
    summary = EvalSummary.of(env_id, policy.name, trajectories, metrics.wall_seconds)
    return EvalResult(summary=summary, trajectories=trajectories, metrics=metrics)


async def _drain(stream: TrajectoryStream) -> None:
    """Evaluation reads results per group; the stream itself is only emptied."""
    async for _ in stream:
        pass


def _episode_record(t: Trajectory) -> dict[str, Any]:
    return {
        "task": t.task.id if t.task else None,
        "seed": t.task.seed if t.task else None,
        "difficulty": t.task.difficulty if t.task else None,
        "status": t.status,
        "success": t.success,
        "reward": t.reward,
        "turns": t.num_turns,
        "error": t.error,
    }
