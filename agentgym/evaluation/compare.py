"""Two evaluations compared task by task (``agentgym compare RUN_A RUN_B``), B minus A.

Tasks are paired by id; each side's per-task success rate and mean reward come from its scored
samples. Significance is a two-sided paired sign-flip permutation test on the per-task differences:
exact up to 16 differing tasks, else 100,000 seeded random flips. With one sample per task the test
on success is the exact McNemar (sign) test on the discordant tasks.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from agentgym.evaluation.records import RunFolder
from agentgym.evaluation.scores import TaskScore, score

EXACT_LIMIT = 16
DRAWS = 100_000
SHOWN = 15
"""Tasks listed with the largest differences."""


def sign_flip_p_value(differences: list[float], *, seed: int = 0) -> float:
    """Two-sided p-value of the mean paired difference being 0: the share of sign assignments whose
    |sum| is at least the observed one (zeros carry no sign)."""
    d = np.array([x for x in differences if x != 0.0], dtype=np.float64)
    if d.size == 0:
        return 1.0
    observed = abs(d.sum()) - 1e-12
    if d.size <= EXACT_LIMIT:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        return float(np.mean(np.abs(signs @ d) >= observed))
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(DRAWS, d.size))
    return float((np.sum(np.abs(signs @ d) >= observed) + 1) / (DRAWS + 1))


class TaskDifference(BaseModel):
    id: str
    success_a: float
    success_b: float
    reward_a: float
    reward_b: float


class Comparison(BaseModel):
    """The result of :func:`compare_runs`."""

    agent_a: str
    agent_b: str
    tasks: int
    """Tasks scored in both runs."""
    only_a: int
    only_b: int
    success_a: float
    success_b: float
    p_success: float
    reward_a: float
    reward_b: float
    p_reward: float
    b_better: int
    """Tasks whose success rate is higher in B."""
    a_better: int
    largest: list[TaskDifference]

    def markdown(self) -> str:
        """A short readable summary with the largest per-task differences."""
        verdict = ("significant at 5%" if self.p_success < 0.05 else "not significant at 5%")
        lines = [
            f"# {self.agent_b} (B) vs {self.agent_a} (A) on {self.tasks} shared tasks",
            "",
            "| | A | B | B - A | p (paired) |",
            "|---|---:|---:|---:|---:|",
            _row("success", f"{self.success_a:.1%}", f"{self.success_b:.1%}",
                 f"{self.success_b - self.success_a:+.1%}", f"{self.p_success:.4f}"),
            _row("mean reward", f"{self.reward_a:.3f}", f"{self.reward_b:.3f}",
                 f"{self.reward_b - self.reward_a:+.3f}", f"{self.p_reward:.4f}"),
            "",
            f"B does better on {self.b_better} tasks, worse on {self.a_better}; the difference in success is {verdict}.",
        ]
        if self.only_a or self.only_b:
            lines.append(f"Left out: {self.only_a} tasks scored only in A, {self.only_b} only in B.")
        if self.largest:
            lines += ["", "| task | success A | success B | reward A | reward B |", "|---|---:|---:|---:|---:|"]
            lines += [_row(t.id, f"{t.success_a:.2f}", f"{t.success_b:.2f}", f"{t.reward_a:.3f}", f"{t.reward_b:.3f}")
                      for t in self.largest]
        return "\n".join(lines)


def compare_runs(run_a: str | Path, run_b: str | Path) -> Comparison:
    """Pair the scored tasks of two evaluation folders and test the differences."""
    return compare_tasks(_tasks(run_a), _tasks(run_b), RunFolder(run_a).spec().agent, RunFolder(run_b).spec().agent,
                         where=f"{run_a} and {run_b}")


def compare_tasks(a: Mapping[str, TaskScore], b: Mapping[str, TaskScore], agent_a: str, agent_b: str, *,
                  where: str = "the two runs") -> Comparison:
    """Pair two runs' tasks with scored samples (by id) and test the differences; ``where`` names the runs in the
    error raised when they share none."""
    shared = [t for t in a if t in b]
    if not shared:
        raise ValueError(f"{where} share no scored task; compare runs of the same suite or tasks")
    success = [b[t].successes / b[t].samples - a[t].successes / a[t].samples for t in shared]
    reward = [b[t].scored_reward - a[t].scored_reward for t in shared]
    ranked = sorted(range(len(shared)), key=lambda i: (-abs(success[i]), -abs(reward[i]), shared[i]))
    n = len(shared)
    return Comparison(
        agent_a=agent_a,
        agent_b=agent_b,
        tasks=n,
        only_a=len(set(a) - set(b)),
        only_b=len(set(b) - set(a)),
        success_a=sum(a[t].successes / a[t].samples for t in shared) / n,
        success_b=sum(b[t].successes / b[t].samples for t in shared) / n,
        p_success=sign_flip_p_value(success),
        reward_a=sum(a[t].scored_reward for t in shared) / n,
        reward_b=sum(b[t].scored_reward for t in shared) / n,
        p_reward=sign_flip_p_value(reward),
        b_better=sum(d > 0 for d in success),
        a_better=sum(d < 0 for d in success),
        largest=[TaskDifference(id=shared[i], success_a=a[shared[i]].successes / a[shared[i]].samples,
                                success_b=b[shared[i]].successes / b[shared[i]].samples,
                                reward_a=a[shared[i]].mean_reward, reward_b=b[shared[i]].mean_reward)
                 for i in ranked[:SHOWN] if success[i] or reward[i]],
    )


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _tasks(path: str | Path) -> dict[str, TaskScore]:
    """A run's tasks with at least one scored sample, by id."""
    run = RunFolder(path)
    scores = score(run.spec(), run.finished().values(), [], 0.0)
    return {t.id: t for t in scores.per_task if t.samples > 0}
