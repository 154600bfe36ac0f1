"""Weights & Biases: one W&B run per training run, continued on resume.

Every metric is charted against the run's own ``step`` (``define_metric("*", step_metric="step")``), not W&B's
internal ``_step``, so the held-out ``eval/*`` curves, logged only at evaluations, share the x-axis of the training
curves, and a resumed run, which repeats the steps after its checkpoint, is never refused for going back a step.
Offline (``logging.wandb.mode: offline`` or ``WANDB_MODE=offline``) the run is written under ``wandb/`` in the run dir
(or ``WANDB_DIR``) for ``wandb sync`` later; a resumed offline run adds a folder with the same run id, and
``wandb sync`` uploads both to the one run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import wandb

if TYPE_CHECKING:
    from agentgym.tracking import Table
    from agentgym.tracking.config import WandbSettings

STEP = "step"
"""The metric every chart's x-axis is."""


class WandbTracker:
    """A W&B run (``wandb.init``) holding the config; ``saved``: the ``{"id": ...}`` of a run to continue."""

    name = "wandb"

    def __init__(self, project: str, run_name: str, run_dir: Path, config: Mapping[str, Any],
                 settings: WandbSettings, saved: Mapping[str, Any] | None = None) -> None:
        run_id = saved.get("id") if saved else None
        self._run: Any = wandb.init(
            project=project, entity=settings.entity, name=run_name, mode=settings.mode, config=dict(config),
            dir=None if os.environ.get("WANDB_DIR") else str(run_dir), id=run_id,
            resume="allow" if run_id else None, allow_val_change=run_id is not None, reinit="create_new")
        self._run.define_metric(STEP, hidden=True)
        self._run.define_metric("*", step_metric=STEP)
        self._id: str = self._run.id
        self._closed = False

    @property
    def state(self) -> dict[str, Any]:
        return {"id": self._id}

    def log(self, step: int, metrics: Mapping[str, float | int | bool], wall_time: float) -> None:
        self._run.log({STEP: step, **metrics})

    def log_table(self, step: int, table: Table) -> None:
        rows = [list(row) for row in table.rows]
        self._run.log({STEP: step, table.key: wandb.Table(columns=list(table.columns), data=rows)})

    def close(self, *, failed: bool = False) -> None:
        if not self._closed:
            self._closed = True
            self._run.finish(exit_code=1 if failed else 0)
