"""Measured phase times, the simulator's input: the per-step rollout and training seconds of real agentgym runs
(a run's ``metrics.jsonl``, or a JSON list of ``{"rollout": s, "train": s}``), and the shape the cluster trace
scales them by (each step relative to the run's mean step, and the long tail's share of a rollout)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentgym.metrics_log import JSONL_NAME
from agentgym.trainers.mux.profile import StepPhases, step_phases


def load_metrics(path: str | Path) -> list[StepPhases]:
    """The steps of a run's ``metrics.jsonl`` (the file or its run dir), as admission profiles them
    (:func:`~agentgym.trainers.mux.profile.step_phases`); a run without timed steps is an error."""
    path = Path(path)
    steps = step_phases(path.parent if path.name == JSONL_NAME else path)
    if not steps:
        raise ValueError(f"{path} has no step with time/step_seconds and time/wait_seconds")
    return steps


def load_samples(path: str | Path) -> list[StepPhases]:
    """Per-step phases given directly: a JSON list of ``{"rollout": seconds, "train": seconds}``."""
    rows = json.loads(Path(path).read_text())
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path} must hold a non-empty JSON list of {{'rollout': s, 'train': s}}")
    return [StepPhases(rollout=float(row["rollout"]), learn=float(row["train"]), publish=0.0) for row in rows]


def load(path: str | Path) -> list[StepPhases]:
    """A run dir or ``*.jsonl`` through :func:`load_metrics`, a ``*.json`` list through :func:`load_samples`."""
    path = Path(path)
    return load_samples(path) if path.suffix == ".json" else load_metrics(path)


@dataclass(frozen=True)
class Shape:
    """A run's phase times without its scale: each step's rollout and training over the run's mean step time
    (so they average to 1 together, keeping the run's rollout/training ratio and its spread), and ``tail``, the
    share of a rollout spent after ``release`` of its work has closed (see :func:`tail_share`)."""

    name: str
    rollout: tuple[float, ...]
    train: tuple[float, ...]
    tail: float

    @classmethod
    def of(cls, name: str, steps: Sequence[StepPhases], *, release: float = 0.8) -> Shape:
        """The shape of measured ``steps``."""
        mean = statistics.fmean(s.rollout + s.train for s in steps)
        if mean <= 0:
            raise ValueError(f"{name}: the steps take no time")
        rollouts = [s.rollout for s in steps]
        return cls(name, tuple(r / mean for r in rollouts), tuple(s.train / mean for s in steps),
                   tail_share(rollouts, release))

    @property
    def rollout_share(self) -> float:
        """The rollout's share of the mean step."""
        return statistics.fmean(self.rollout)


def tail_share(rollouts: Sequence[float], release: float = 0.8) -> float:
    """The share of a rollout after ``release`` of its work has closed: ``1 - q_release / max`` of the rollout
    times. The runs log each step's whole rollout, not when each group closed, so the spread across steps
    stands in for the spread of groups within a step (a synchronous batch ends with its slowest groups)."""
    if len(rollouts) < 2 or max(rollouts) <= 0:
        return 0.0
    cut = statistics.quantiles(rollouts, n=100, method="inclusive")[min(98, max(0, round(release * 100) - 1))]
    return max(0.0, 1.0 - cut / max(rollouts))
