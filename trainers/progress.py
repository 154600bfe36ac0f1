"""The live view of a training run: steps done with reward, success, throughput and staleness."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Self

from rich.console import Console

from agentgym.progress import LiveProgress

_FIELDS = (
    ("rollout/reward_mean", "reward", "{:.3f}"),
    ("rollout/success_rate", "success", "{:.0%}"),
    ("eval/success_rate", "held-out", "{:.0%}"),
    ("time/trajectories_per_second", "traj/s", "{:.1f}"),
    ("rollout/tokens_per_second", "tok/s", "{:.0f}"),
    ("train/staleness_mean", "staleness", "{:.2f}"),
    ("train/ess_ratio", "ESS", "{:.2f}"),
    ("rollout/carry_buffer", "carried", "{:.0f}"),
    ("rollout/dropped_stale", "dropped stale", "{:.0f}"),
    ("train/loss", "loss", "{:+.4f}"),
)


class TrainProgress:
    """Optimizer steps on a :class:`LiveProgress` (a bar on a terminal, a line per step elsewhere) whose
    status shows the latest of :data:`_FIELDS`, and says so when the step's ESS ratio fell below ``collapse``."""

    def __init__(self, total: int, done: int = 0, *, console: Console | None = None, collapse: float = 0.0) -> None:
        self._view = LiveProgress("train step", total, done, console=console or Console(),
                                  status="waiting for rollouts")
        self._latest: dict[str, float] = {}
        self._collapse = collapse

    def update(self, metrics: Mapping[str, float], *, advance: int = 0) -> None:
        """Show ``metrics`` (keeping earlier values of keys they lack) and move ``advance`` steps; off a terminal,
        metrics that come without a step (an evaluation's) are printed at once."""
        self._latest.update({k: v for k, v in metrics.items() if isinstance(v, int | float)})
        parts = [f"{label} {fmt.format(self._latest[key])}" for key, label, fmt in _FIELDS if key in self._latest]
        if self._latest.get("train/ess_ratio", 1.0) < self._collapse:
            parts.append("ESS COLLAPSED: a few stale trajectories carry the step")
        self._view.update(advance=advance, status="  ".join(parts), flush=not advance)

    def __enter__(self) -> Self:
        self._view.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._view.__exit__(exc_type, exc, tb)
