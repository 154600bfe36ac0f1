"""A training run's played episodes, ``rollouts.jsonl``: one line per episode of every group a step took, whether
it trained on it or left it out, with the step, the group's advantage and the trainer's own logprobs of the
tokens, beside the behaviour's the trajectory holds. Screens go to ``screens/`` as in an evaluation's folder."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from agentgym.evaluation.records import EpisodeSummary, Screens
from agentgym.trajectory import Trajectory

ROLLOUTS = "rollouts.jsonl"
LOGPROB_DIGITS = 6
"""Decimals kept of a trainer logprob: a float32's noise is below them, and the lines stay half as long."""
Outcome = Literal["trained", "uniform", "dropped", "stale"]
"""What the step did with a group: trained on it; left it out with equal rewards (``algorithm.skip_uniform_groups``
or dynamic sampling's drop); or left it out as older than ``trainer.async_ratio`` versions."""


class RolloutRecord(EpisodeSummary):
    """One episode of a group a training step took."""

    step: int = Field(ge=1)
    """The step that took the group: its trained weights are version ``step``."""
    position: int
    """The group's task position in the run's hand-out order."""
    carried: bool = False
    """A carry-over group (``rollout.carry_over``) of that position's task."""
    outcome: Outcome
    advantage: float | None = None
    """The advantage the loss gave the episode (None where it was not trained)."""
    version_min: int | None = None
    version_max: int | None = None
    """The oldest and newest policy versions that sampled its tokens (None for a policy without tokens)."""
    trainer_logprobs: list[float] = Field(default_factory=list)
    """Per token, aligned with ``trajectory.token_ids``: the trainer's logprob of each agent token under the weights
    the step started from (0 elsewhere); empty where it was not trained."""
    trajectory: Trajectory


def rollout_record(trajectory: Trajectory, *, step: int, position: int, carried: bool, member: int,
                   outcome: Outcome, advantage: float | None = None, trainer_logprobs: Sequence[float] = ()
                   ) -> RolloutRecord:
    """The record of one ``member`` of a group, ``trainer_logprobs`` given for its agent tokens in order."""
    if trajectory.task is None:
        raise ValueError(f"a trained episode of {trajectory.env_id} has no task")
    versions = [v for v in trajectory.versions if v >= 0]
    return RolloutRecord(
        key=f"{step}/{position}{'c' if carried else ''}/{member}", task=trajectory.task, sample=member,
        status=trajectory.status, success=trajectory.success, reward=trajectory.reward, turns=trajectory.num_turns,
        tokens=sum(trajectory.loss_mask), seconds=trajectory.timings.get("total_seconds", 0.0),
        error=trajectory.error, error_cause=trajectory.info.get("error_cause"), step=step, position=position,
        carried=carried, outcome=outcome, advantage=advantage,
        version_min=min(versions, default=None), version_max=max(versions, default=None),
        trainer_logprobs=_aligned(trajectory.loss_mask, trainer_logprobs), trajectory=trajectory)


def _aligned(loss_mask: Sequence[int], agent_values: Sequence[float]) -> list[float]:
    if not agent_values:
        return []
    if len(agent_values) != sum(loss_mask):
        raise ValueError(f"{len(agent_values)} trainer logprobs for {sum(loss_mask)} agent tokens")
    values = iter(agent_values)
    return [round(next(values), LOGPROB_DIGITS) if agent else 0.0 for agent in loss_mask]


class RolloutLog:
    """Appends a training run's records to ``run_dir/rollouts.jsonl``, a step's lines in one flushed write."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.screens = Screens(run_dir)

    def append(self, records: Sequence[RolloutRecord]) -> None:
        lines = [r.model_copy(update={"trajectory": self.screens.strip(r.trajectory)}).model_dump_json() + "\n"
                 for r in records]
        with (self.run_dir / ROLLOUTS).open("a") as f:
            f.write("".join(lines))
            f.flush()
            os.fsync(f.fileno())
