"""Two runs side by side: the tasks one solved and the other did not, each with both runs' episodes, and the paired
statistics of ``agentgym compare`` (:func:`agentgym.evaluation.compare.compare_tasks`) over their shared tasks.

A run is compared through its evaluation: an evaluation folder itself, a training run's latest held-out one. Per-task
scores are read from the index (summary fields only), so two large runs compare without reading their trajectories.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agentgym.evaluation.compare import Comparison, compare_tasks
from agentgym.evaluation.scores import TaskScore, mean
from agentgym.view.index import Entry
from agentgym.view.listing import Listing
from agentgym.view.runs import Run, Source

SHOWN = 200
"""Tasks listed per side."""


@dataclass
class TaskPair:
    """One task with its episodes in both runs."""

    task_id: str
    a: list[Entry]
    b: list[Entry]


@dataclass
class RunsCompared:
    """What the compare page shows."""

    source_a: Source | None
    source_b: Source | None
    comparison: Comparison | None = None
    problem: str | None = None
    """Why there are no statistics (no evaluation yet, or no shared task)."""
    solved_only_a: list[TaskPair] = field(default_factory=list)
    solved_only_b: list[TaskPair] = field(default_factory=list)
    solved_both: int = 0
    solved_neither: int = 0


def task_scores(by_task: Mapping[str, list[Entry]]) -> dict[str, TaskScore]:
    """Each task with at least one scored sample, as :func:`agentgym.evaluation.scores.score` scores it."""
    scores = {}
    for task_id, entries in by_task.items():
        scored = [e for e in entries if e.scored]
        if scored:
            scores[task_id] = TaskScore(id=task_id, env_id=entries[0].env_id, difficulty=entries[0].difficulty,
                                        samples=len(scored), successes=sum(e.success for e in scored),
                                        mean_reward=mean(e.reward for e in scored),
                                        infra_errors=len(entries) - len(scored))
    return scores


def compare(run_a: Run, run_b: Run, listing: Listing) -> RunsCompared:
    """Compare the evaluations of two runs."""
    source_a, source_b = run_a.latest_evaluation(), run_b.latest_evaluation()
    result = RunsCompared(source_a, source_b)
    if source_a is None or source_b is None:
        missing = run_a if source_a is None else run_b
        result.problem = f"{missing.name} has no evaluation yet"
        return result
    by_task_a, by_task_b = listing.by_task(source_a.index), listing.by_task(source_b.index)
    a, b = task_scores(by_task_a), task_scores(by_task_b)
    spec_a, spec_b = run_a.spec(source_a), run_b.spec(source_b)
    try:
        result.comparison = compare_tasks(a, b, spec_a.agent if spec_a else run_a.name,
                                          spec_b.agent if spec_b else run_b.name,
                                          where=f"{run_a.name} and {run_b.name}")
    except ValueError as exc:
        result.problem = str(exc)
        return result
    for task_id in a:
        if task_id not in b:
            continue
        solved_a, solved_b = a[task_id].successes > 0, b[task_id].successes > 0
        pair = TaskPair(task_id, by_task_a[task_id], by_task_b[task_id])
        if solved_a and not solved_b:
            result.solved_only_a.append(pair)
        elif solved_b and not solved_a:
            result.solved_only_b.append(pair)
        elif solved_a:
            result.solved_both += 1
        else:
            result.solved_neither += 1
    result.solved_only_a.sort(key=lambda pair: pair.task_id)
    result.solved_only_b.sort(key=lambda pair: pair.task_id)
    return result
