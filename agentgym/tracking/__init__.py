"""Experiment trackers: a run's metrics, config and sample episodes sent to TensorBoard, W&B, MLflow or trackio.

Each tracker is one small module over its library's own API, imported only when a run lists it
(``logging.trackers``). :func:`open_trackers` opens the listed ones for a run dir, logging the run's config;
:class:`~agentgym.metrics_log.MetricsLog` then sends each record to every one of them and closes them with
itself. The ids of the runs the trackers made are kept in the run dir (``trackers.json``), so opening the trackers
again for the same run dir (``agentgym train --resume``) continues the same W&B, MLflow and trackio runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentgym.errors import AgentGymError
from agentgym.evaluation.records import RunFolder
from agentgym.tracking.config import (
    PACKAGES,
    MlflowSettings,
    TrackerName,
    TrackingConfig,
    WandbSettings,
    needs,
)

__all__ = ["STATE_FILE", "MlflowSettings", "Table", "Tracker", "TrackerName", "TrackingConfig", "WandbSettings",
           "episode_table", "open_trackers"]

STATE_FILE = "trackers.json"
"""In the run dir: each tracker's run id (``{"wandb": {"id": ...}, ...}``), which a resumed run continues."""
EPISODE_COLUMNS = ("task_id", "env_id", "difficulty", "status", "success", "reward", "turns", "last_action")
ACTION_CHARS = 300
"""The agent's last action is cut to this many characters in the sample table."""


@dataclass(frozen=True)
class Table:
    """A small table logged at one step: the trackers show it under ``key`` (W&B and trackio tables, an MLflow
    table artifact, a TensorBoard text summary)."""

    key: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str | int | float | bool | None, ...], ...]

    def records(self) -> list[dict[str, Any]]:
        """The rows as ``{column: value}`` mappings."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class Tracker(Protocol):
    """One experiment tracker a run's records go to; the run's config was logged when it was opened."""

    name: str

    @property
    def state(self) -> dict[str, Any]:
        """What finds this tracker's run again (its id), kept in the run dir's ``trackers.json``."""
        ...

    def log(self, step: int, metrics: Mapping[str, float | int | bool], wall_time: float) -> None:
        """Record ``metrics`` at ``step`` (``wall_time``: seconds since the epoch)."""
        ...

    def log_table(self, step: int, table: Table) -> None:
        """Record ``table`` at ``step``."""
        ...

    def close(self, *, failed: bool = False) -> None:
        """Flush and end the tracker's run (marked failed where the library has the notion); again: nothing."""
        ...


def open_trackers(settings: TrackingConfig, run_dir: str | os.PathLike[str], config: Mapping[str, Any]) -> list[Tracker]:
    """The trackers ``settings`` lists, opened for ``run_dir`` with the run's resolved ``config`` logged; a run dir
    whose ``trackers.json`` names a tracker's run continues that run. Raises :class:`AgentGymError` where a
    tracker's package cannot be imported."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / STATE_FILE
    saved: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    opened: list[Tracker] = []
    try:
        for name in settings.trackers:
            opened.append(_open(name, settings, run_dir, config, saved.get(name)))
    except BaseException:
        for tracker in opened:
            tracker.close(failed=True)
        raise
    states = {**saved, **{t.name: t.state for t in opened if t.state}}
    if states != saved:
        tmp = path.with_name(f".{STATE_FILE}.tmp")
        tmp.write_text(json.dumps(states, indent=1) + "\n")
        os.replace(tmp, path)
    return opened


def _open(name: str, settings: TrackingConfig, run_dir: Path, config: Mapping[str, Any],
          saved: dict[str, Any] | None) -> Tracker:
    run_name = settings.run_name or run_dir.resolve().name
    try:
        if name == "tensorboard":
            from agentgym.tracking.tensorboard import TensorBoardTracker

            return TensorBoardTracker(run_dir, config)
        if name == "wandb":
            from agentgym.tracking.wandb import WandbTracker

            return WandbTracker(settings.project, run_name, run_dir, config, settings.wandb, saved)
        if name == "mlflow":
            from agentgym.tracking.mlflow import MlflowTracker

            return MlflowTracker(settings.project, run_name, run_dir, config, settings.mlflow, saved)
        if name == "trackio":
            from agentgym.tracking.trackio import TrackioTracker

            return TrackioTracker(settings.project, run_name, config, saved)
    except ImportError as error:
        raise AgentGymError(f"logging.trackers: {needs(name, [error.name or PACKAGES[name][0]])}") from error
    raise AgentGymError(f"logging.trackers: no tracker {name!r}; choose from {', '.join(PACKAGES)}")


def episode_table(folder: str | os.PathLike[str], rows: int = 16, key: str = "eval/episodes") -> Table:
    """A sample of the episodes of the evaluation in ``folder``: the first ``rows`` by task (the same tasks at
    every evaluation of a run), with the agent's last action cut to :data:`ACTION_CHARS` characters."""
    records = sorted(RunFolder(Path(folder)).finished().values(), key=lambda r: (r.task.env_id, r.task.id, r.sample))
    sample: list[tuple[str | int | float | bool | None, ...]] = []
    for record in records[:rows]:
        turns = record.trajectory.turns
        action = turns[-1].action if turns else ""
        if len(action) > ACTION_CHARS:
            action = action[: ACTION_CHARS - 1] + "…"
        sample.append((record.task.id, record.task.env_id, record.task.difficulty, record.status, record.success,
                       record.reward, record.turns, action))
    return Table(key, EPISODE_COLUMNS, tuple(sample))


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``; lists and other values stay as they are."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
