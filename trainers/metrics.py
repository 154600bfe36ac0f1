"""Training and held-out metrics by environment and by difficulty level, for runs on several of either.

Keys are ``<prefix>/<env id>/success_rate``, ``.../reward_mean`` and ``.../success_<level>`` on a mixture, and
``<prefix>/success_<level>`` on one environment with several levels; a run on one level of one environment
adds none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from agentgym.evaluation.scores import RunScores
from agentgym.trainers.curriculum import level_name
from agentgym.trainers.mixture import Source
from agentgym.trajectory import Trajectory

_Tally = tuple[int, float, float]
"""Episodes, successes and summed reward of a slice."""


def by_environment(prefix: str, trajectories: Iterable[Trajectory], sources: list[Source]) -> dict[str, float]:
    """Success and mean reward per environment and level of ``trajectories`` (finished episodes)."""
    tallies: dict[tuple[str, str | None], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for t in trajectories:
        for key in ((t.task.env_id, None), (t.task.env_id, level_name(t.task.difficulty))):
            tally = tallies[key]
            tally[0] += 1
            tally[1] += t.success
            tally[2] += t.reward
    return _keys(prefix, {key: (int(n), s, r) for key, (n, s, r) in tallies.items()}, sources)


def eval_by_environment(scores: RunScores, sources: list[Source]) -> dict[str, float]:
    """The same breakdown of an evaluation's scored samples (from its per-task scores)."""
    tallies: dict[tuple[str, str | None], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for task in scores.per_task:
        if not task.samples:
            continue
        for key in ((task.env_id, None), (task.env_id, level_name(task.difficulty))):
            tally = tallies[key]
            tally[0] += task.samples
            tally[1] += task.successes
            tally[2] += (task.mean_reward or 0.0) * task.samples
    return _keys(prefix="eval", tallies={key: (int(n), s, r) for key, (n, s, r) in tallies.items()}, sources=sources)


def _keys(prefix: str, tallies: dict[tuple[str, str | None], _Tally], sources: list[Source]) -> dict[str, float]:
    several_envs = len(sources) > 1
    levels = {s.id: len(s.difficulties) for s in sources}
    values: dict[str, float] = {}
    for (env, level), (n, successes, reward) in tallies.items():
        scope = f"{prefix}/{env}" if several_envs else prefix
        if level is None and several_envs:
            values[f"{scope}/success_rate"] = successes / n
            values[f"{scope}/reward_mean"] = reward / n
        elif level is not None and levels.get(env, 1) > 1:
            values[f"{scope}/success_{level}"] = successes / n
    return values
