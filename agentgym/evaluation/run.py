"""An evaluation run: every task of a split played ``samples`` times, streamed to a folder episode by
episode, resumable after a crash, and summarised with a report at the end.

Sample ``s`` of task ``i`` is rollout group ``i * samples + s`` whatever else runs, so its policy
randomness is the same in a resumed run as in an uninterrupted one. ``--resume`` plays only the task
samples without a scored record (those lost to infrastructure are played again).

Under ``rollout_sampling: latr`` the ``samples`` of task ``i`` are one rollout group, ``i``, of that size: grown
as one tree through the scheduler's tree path (as in training), with stochastic refills for what the tree fell
short of; its episodes become samples in :func:`~agentgym.evaluation.play.group_samples`'s order (the root is
sample 0). A tree cannot be partly replayed, so ``--resume`` plays again every task with a sample not scored,
all its samples.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentgym.episode import Timeouts
from agentgym.errors import AgentGymError
from agentgym.evaluation.play import group_samples, play_groups
from agentgym.evaluation.records import RunFolder, RunSpec, task_key, tasks_digest
from agentgym.evaluation.report import write_report
from agentgym.evaluation.scores import RunScores, score
from agentgym.policies import Policy
from agentgym.rollout.config import RolloutConfig, TreeRollout
from agentgym.rollout.runner import Backend
from agentgym.rollout.scheduler import GroupResult
from agentgym.tasks import Task

SUMMARY = "summary.json"


class ResumeMismatch(AgentGymError, ValueError):
    """``--resume`` was asked to continue an evaluation with different settings."""


@dataclass(frozen=True)
class Progress:
    """Where a run stands, for a progress bar: the environment now playing and the samples done of all."""

    env_id: str
    done: int
    total: int


async def run_evaluation(
    spec: RunSpec,
    tasks: list[Task],
    policy: Policy,
    folder: str | Path,
    *,
    resume: bool = False,
    concurrency: int = 8,
    timeouts: Timeouts | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    backend: Backend | None = None,
) -> RunScores:
    """Play ``tasks`` under ``spec`` into ``folder`` (new, or the same spec's with ``resume``), then write
    ``summary.json``, ``report.md`` and ``report.html`` there and return the scores. ``backend`` says where
    the episodes play (default: here); it changes no score."""
    if spec.tasks_sha256 != tasks_digest(tasks):
        raise ValueError("spec.tasks_sha256 is not the checksum of the tasks given")
    run = RunFolder(folder)
    previous_wall = _open(run, spec, resume)
    started = time.perf_counter()
    scored = {key for key, record in run.finished().items() if record.scored}
    pending = _pending(spec, tasks, scored)
    total = len(tasks) * spec.samples
    finished = total - sum(len(samples) for groups in pending.values() for _, samples in groups.values())
    tree = spec.rollout_sampling == "latr"
    config = RolloutConfig(concurrency=concurrency, seed=spec.seed, max_retries=spec.max_retries,
                           timeouts=timeouts or Timeouts(), group_size=spec.samples if tree else 1,
                           sampling=spec.rollout_sampling, latr=spec.latr or TreeRollout())
    for env_id, groups in pending.items():

        def settle(group: GroupResult, env_id: str = env_id, groups: dict[int, tuple[Task, list[int]]] = groups) -> None:
            nonlocal finished
            task, samples = groups[group.index]
            for sample, (final, failed) in zip(samples, group_samples(group, len(samples)), strict=False):
                run.append(task, sample, final, failed)
                finished += 1
            if on_progress is not None:
                on_progress(Progress(env_id, finished, total))

        if on_progress is not None:
            on_progress(Progress(env_id, finished, total))
        await play_groups(env_id, policy, [task for task, _ in groups.values()], config, settle,
                          indices=list(groups), env_kwargs=spec.env_kwargs(env_id), backend=backend)
    return finish(run.path, previous_wall + time.perf_counter() - started)


def _pending(spec: RunSpec, tasks: list[Task], scored: set[str]) -> dict[str, dict[int, tuple[Task, list[int]]]]:
    """What is left to play, by environment: each rollout group's index, its task and the samples it plays.
    Stochastic: every sample without a scored record, alone as group ``i * samples + s``; ``latr``: every task
    with a sample not scored, all its samples as group ``i`` (a tree cannot be partly replayed)."""
    pending: dict[str, dict[int, tuple[Task, list[int]]]] = {}
    for i, task in enumerate(tasks):
        missing = [s for s in range(spec.samples) if task_key(task, s) not in scored]
        if not missing:
            continue
        groups = pending.setdefault(task.env_id, {})
        if spec.rollout_sampling == "latr":
            groups[i] = (task, list(range(spec.samples)))
        else:
            groups.update({i * spec.samples + s: (task, [s]) for s in missing})
    return pending


def finish(folder: str | Path, wall_seconds: float | None = None) -> RunScores:
    """Score the records in ``folder`` and write its summary and reports (again); ``wall_seconds``
    defaults to the figure the last summary recorded."""
    run = RunFolder(folder)
    if wall_seconds is None:
        wall_seconds = _recorded_wall(run)
    scores = score(run.spec(), run.finished().values(), run.infra_errors(), wall_seconds)
    (run.path / SUMMARY).write_text(scores.model_dump_json(indent=2) + "\n")
    write_report(run, scores)
    return scores


def _open(run: RunFolder, spec: RunSpec, resume: bool) -> float:
    """Start the folder, or check it holds the same evaluation; the wall time already spent on it."""
    if not resume:
        if run.exists:
            raise ValueError(f"{run.path} already holds an evaluation; continue it with --resume or choose another --out")
        run.start(spec)
        return 0.0
    if not run.exists:
        raise ValueError(f"--resume: {run.path} holds no evaluation to continue")
    differences = spec.differences(run.spec())
    if differences:
        raise ResumeMismatch(f"--resume: {run.path} was started with other settings ({', '.join(differences)}); "
                             "resume with the same arguments or choose another --out")
    return _recorded_wall(run)


def _recorded_wall(run: RunFolder) -> float:
    path = run.path / SUMMARY
    return float(json.loads(path.read_text()).get("wall_seconds", 0.0)) if path.exists() else 0.0
