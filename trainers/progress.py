"""The live view of a training run: a step bar with reward, success, throughput and staleness."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

_FIELDS = (
    ("rollout/reward_mean", "reward", "{:.3f}"),
    ("rollout/success_rate", "success", "{:.0%}"),
    ("eval/success_rate", "held-out", "{:.0%}"),
    ("rollout/trajectories_per_second", "traj/s", "{:.1f}"),
    ("train/staleness_mean", "staleness", "{:.2f}"),
    ("train/loss", "loss", "{:+.4f}"),
)


class TrainProgress:
    """A rich progress bar over optimizer steps whose line shows the latest of :data:`_FIELDS`."""

    def __init__(self, total: int, done: int = 0, *, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[line]}"),
            console=console,
        )
        self._latest: dict[str, float] = {}
        self._task = self._progress.add_task("train", total=total, completed=done, line="waiting for rollouts")

    def update(self, metrics: Mapping[str, float], *, advance: int = 0) -> None:
        """Show ``metrics`` (keeping earlier values of keys they lack) and move the bar ``advance`` steps."""
        self._latest.update({k: v for k, v in metrics.items() if isinstance(v, int | float)})
        parts = [f"{label} {fmt.format(self._latest[key])}" for key, label, fmt in _FIELDS if key in self._latest]
        self._progress.update(self._task, advance=advance, line="  ".join(parts))

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._progress.stop()
