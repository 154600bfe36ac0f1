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

_Row = tuple[str, str | None, int, float, float]
"""A slice of episodes: environment, level, episodes, successes and summed reward."""


def by_environment(prefix: str, trajectories: Iterable[Trajectory], sources: list[Source]) -> dict[str, float]:
    """Success and mean reward per environment and level of ``trajectories`` (finished episodes)."""
    rows = ((t.task.env_id, t.task.difficulty, 1, float(t.success), t.reward) for t in trajectories)
    return _keys(prefix, rows, sources)


def eval_by_environment(scores: RunScores, sources: list[Source]) -> dict[str, float]:
    """The same breakdown of an evaluation's scored samples (from its per-task scores)."""
    rows = ((task.env_id, task.difficulty, task.samples, task.successes, (task.mean_reward or 0.0) * task.samples)
            for task in scores.per_task if task.samples)
    return _keys("eval", rows, sources)


def _keys(prefix: str, rows: Iterable[_Row], sources: list[Source]) -> dict[str, float]:
    tallies: dict[tuple[str, str | None], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for env, level, n, successes, reward in rows:
        for key in ((env, None), (env, level_name(level))):  # the environment's whole, and its level
            tally = tallies[key]
            tally[0] += n
            tally[1] += successes
            tally[2] += reward
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
