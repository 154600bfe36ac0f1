"""Scores of an evaluation from its episode records: success, pass@k, reward, turns, tokens, time, and
breakdowns by family, environment and difficulty. Infrastructure errors are counted apart, never scored;
a mean over no scored episode is undefined (None), never 0."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from pydantic import BaseModel

from agentgym.evaluation.records import EpisodeRecord, InfraRecord, RunSpec

LEVELS = {"easy": 0, "medium": 1, "hard": 2}
"""The bundled difficulty levels in order; other names follow alphabetically."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of which ``c`` succeeded (Chen et al., 2021):
    ``1 - C(n - c, k) / C(n, k)``, the chance that ``k`` of the samples drawn without replacement hold a success."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a success rate (95% by default); (0, 1) without episodes."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def ks_for(samples: int) -> list[int]:
    """The k of pass@k reported for ``samples`` per task: 1, 2, 4, ... and ``samples`` itself."""
    return sorted({*(2**i for i in range(samples.bit_length()) if 2**i <= samples), samples})


class Breakdown(BaseModel):
    """Scores of a slice of the episodes (a family, an environment, a difficulty)."""

    name: str
    episodes: int
    """Scored episodes."""
    success_rate: float | None
    """None when no episode of the slice was scored."""
    mean_reward: float | None
    infra_errors: int


class TaskScore(BaseModel):
    """One task over its samples."""

    id: str
    env_id: str
    difficulty: str | None
    samples: int
    """Scored samples."""
    successes: int
    mean_reward: float | None
    """None when no sample was scored."""
    infra_errors: int

    @property
    def scored_reward(self) -> float:
        """The mean reward of a task with scored samples; a ``ValueError`` for one without."""
        if self.mean_reward is None:
            raise ValueError(f"task {self.id} has no scored sample")
        return self.mean_reward


class RunScores(BaseModel):
    """The summary of an evaluation (``summary.json``)."""

    agent: str
    suite: str | None
    split: str
    samples: int
    tasks: int
    episodes: int
    """Task samples with a final record (scored or lost to infrastructure)."""
    scored: int
    success_rate: float | None
    """None when no episode was scored (every one lost to infrastructure): the rate is undefined, not 0."""
    success_interval: tuple[float, float]
    """95% Wilson interval of ``success_rate``."""
    pass_at_k: dict[str, float]
    mean_reward: float | None
    """This and the other means are None without a scored episode."""
    mean_turns: float | None
    mean_tokens: float | None
    mean_episode_seconds: float | None
    wall_seconds: float
    infra_errors: int
    """Episodes whose every attempt failed on infrastructure: left out of every score."""
    infra_retried: int
    """Attempts lost to infrastructure and played again."""
    error_causes: dict[str, int]
    by_family: list[Breakdown]
    by_env: list[Breakdown]
    by_difficulty: list[Breakdown]
    by_group: list[Breakdown] = []
    """By :attr:`Task.group <agentgym.tasks.Task.group>`, where tasks have one."""
    per_task: list[TaskScore]


def score(spec: RunSpec, records: Iterable[EpisodeRecord], infra: list[InfraRecord], wall_seconds: float) -> RunScores:
    """Summarise the records of one evaluation."""
    records = list(records)
    scored = [r for r in records if r.scored]
    n = len(scored)
    successes = sum(r.success for r in scored)
    tasks = _per_task(records)
    unscored = len(records) - n
    return RunScores(
        agent=spec.agent,
        suite=spec.suite,
        split=spec.split,
        samples=spec.samples,
        tasks=len(tasks),
        episodes=len(records),
        scored=n,
        success_rate=mean(r.success for r in scored),
        success_interval=wilson_interval(successes, n),
        pass_at_k=_pass_at_k(tasks, spec.samples),
        mean_reward=mean(r.reward for r in scored),
        mean_turns=mean(r.turns for r in scored),
        mean_tokens=mean(r.tokens for r in scored),
        mean_episode_seconds=mean(r.seconds for r in records),
        wall_seconds=wall_seconds,
        infra_errors=unscored,
        infra_retried=len(infra) - unscored,
        error_causes=dict(Counter(i.cause for i in infra)),
        by_family=breakdown(records, lambda r: r.task.env_id.split("/")[0]),
        by_env=breakdown(records, lambda r: r.task.env_id),
        by_difficulty=breakdown(records, lambda r: r.task.difficulty or "default"),
        by_group=breakdown([r for r in records if r.task.group is not None], lambda r: r.task.group or ""),
        per_task=tasks,
    )


def mean(values: Iterable[float]) -> float | None:
    """The mean, or None (undefined) without values."""
    values = list(values)
    return sum(values) / len(values) if values else None


def _per_task(records: list[EpisodeRecord]) -> list[TaskScore]:
    by_task: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_task[r.task.id].append(r)
    out = []
    for task_id, group in by_task.items():
        scored = [r for r in group if r.scored]
        out.append(TaskScore(id=task_id, env_id=group[0].task.env_id, difficulty=group[0].task.difficulty,
                             samples=len(scored), successes=sum(r.success for r in scored),
                             mean_reward=mean(r.reward for r in scored), infra_errors=len(group) - len(scored)))
    return out


def _pass_at_k(tasks: list[TaskScore], samples: int) -> dict[str, float]:
    """pass@k averaged over the tasks with at least k scored samples."""
    out = {}
    for k in ks_for(samples):
        eligible = [t for t in tasks if t.samples >= k]
        if eligible:
            out[str(k)] = sum(pass_at_k(t.samples, t.successes, k) for t in eligible) / len(eligible)
    return out


class Scored(Protocol):
    """An episode as a breakdown counts it: a record, or the viewer's index entry of one."""

    @property
    def scored(self) -> bool: ...
    @property
    def success(self) -> bool: ...
    @property
    def reward(self) -> float: ...


E = TypeVar("E", bound=Scored)


def breakdown(records: Iterable[E], key: Callable[[E], str]) -> list[Breakdown]:
    """Scores of each slice of ``records`` by ``key`` (the bundled levels in order, then by name)."""
    groups: dict[str, list[E]] = defaultdict(list)
    for r in records:
        groups[key(r)].append(r)
    out = []
    for name, group in sorted(groups.items(), key=lambda item: (LEVELS.get(item[0], len(LEVELS)), item[0])):
        scored = [r for r in group if r.scored]
        out.append(Breakdown(name=name, episodes=len(scored), success_rate=mean(r.success for r in scored),
                             mean_reward=mean(r.reward for r in scored), infra_errors=len(group) - len(scored)))
    return out
