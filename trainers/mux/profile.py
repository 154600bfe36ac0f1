"""A job's profile for admission: phase times measured by an earlier run (its ``metrics.jsonl``) or given, and
the host memory its resident states take."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from agentgym.metrics_log import read_metrics
from agentgym.trainers.mux.estimate import Profile

RESIDENT_COPIES = 5
"""Copies of the weights a job keeps in host memory between phases: the engine's, the learner's, its gradients,
and Adam's two moments."""


class StepPhases(NamedTuple):
    """One synchronous step of a run: seconds waiting for the rollout, learning, and publishing the weights."""

    rollout: float
    learn: float
    publish: float

    @property
    def train(self) -> float:
        """The training pool's share of the step: learning and the publish of the new weights."""
        return self.learn + self.publish


def step_phases(run_dir: str | Path) -> list[StepPhases]:
    """Every training step's phases in a run's ``metrics.jsonl`` (evaluation lines skipped): rollout is the
    trainer's wait for its batch, learning the rest of the step less the publish."""
    phases = []
    for record in read_metrics(Path(run_dir)):
        step, wait = record.get("time/step_seconds"), record.get("time/wait_seconds")
        if step is None or wait is None:
            continue
        publish = record.get("time/publish_seconds", 0.0)
        phases.append(StepPhases(wait, max(0.0, step - wait - publish), publish))
    return phases


def measured_profile(run_dir: str | Path, *, memory_gb: float, slo: float) -> Profile:
    """A job's profile from a run's steps: each phase's mean and spread, the SLO on its mean step (like for like),
    the first step left out (it warms caches up)."""
    phases = step_phases(run_dir)
    if not phases:
        raise ValueError(f"{run_dir} records no training steps (time/step_seconds) to profile")
    kept = phases[1:] or phases
    return Profile.from_samples([p.rollout for p in kept], [p.train for p in kept], memory_gb=memory_gb, slo=slo)


def resident_gb(model_dir: str | Path) -> float:
    """Host memory a job on ``model_dir`` keeps resident: :data:`RESIDENT_COPIES` times its weights' size."""
    files = [*Path(model_dir).glob("*.safetensors"), *Path(model_dir).glob("*.bin")]
    return RESIDENT_COPIES * sum(f.stat().st_size for f in files) / 1e9
