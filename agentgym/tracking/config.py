"""The ``logging`` section of a run's config: which experiment trackers get the run, and their few settings.

It is checked when the config is loaded: a tracker whose package is missing is a bad value of ``logging.trackers``
(exit 2, naming the install command), before any model is loaded.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Literal

from pydantic import Field, field_validator, model_validator

from agentgym.config import Config

TrackerName = Literal["tensorboard", "wandb", "mlflow", "trackio"]
INSTALL = "pip install 'agentgym[trackers]'"
"""The install command a missing tracker package names."""
PACKAGES: dict[str, tuple[str, ...]] = {
    "tensorboard": ("tensorboard",),
    "wandb": ("wandb",),
    "mlflow": ("mlflow",),
    "trackio": ("trackio",),
}
"""The importable packages each tracker needs."""
SQLITE_PACKAGES = ("sqlalchemy", "alembic")
"""What MLflow's SQLite store needs beyond ``mlflow-skinny`` (the full ``mlflow`` package has them)."""


def missing(packages: tuple[str, ...]) -> list[str]:
    """Those of ``packages`` that cannot be imported here (found without importing them)."""
    absent = []
    for package in packages:
        try:
            found = importlib.util.find_spec(package) is not None
        except (ImportError, ValueError):  # a parent missing, or a module left without its spec
            found = False
        if not found:
            absent.append(package)
    return absent


def needs(tracker: str, packages: list[str]) -> str:
    """The one-line reason a tracker cannot run without ``packages``."""
    names = " and ".join(f"the {p} package" for p in packages)
    return f"{tracker} needs {names}: {INSTALL}"


class WandbSettings(Config):
    """Weights & Biases (``wandb.init``)."""

    mode: Literal["online", "offline", "disabled"] | None = None
    """``offline`` writes the run under the run dir's ``wandb/`` for ``wandb sync`` later; null: W&B's own choice
    (``WANDB_MODE``, else ``online``)."""
    entity: str | None = None
    """The user or team that owns the project; null: W&B's default (``WANDB_ENTITY``, else your default entity)."""


class MlflowSettings(Config):
    """MLflow (``MlflowClient``)."""

    tracking_uri: str | None = None
    """Where runs are stored: a server (``http://host:5000``) or a database (``sqlite:///path/mlflow.db``); null:
    ``MLFLOW_TRACKING_URI`` where set, else a SQLite store in the run dir (``mlflow.db``, artifacts in
    ``mlartifacts/``), no server needed."""

    def uri(self) -> str | None:
        """The tracking URI in force, or None for the run dir's own SQLite store."""
        return self.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None


class TrackingConfig(Config):
    """Experiment trackers that receive the run: every metric by step, the resolved config, and a sample of
    episodes at each evaluation. ``metrics.jsonl`` and ``metrics.csv`` are written whatever is listed."""

    trackers: list[TrackerName] = Field(default_factory=lambda: list[TrackerName](["tensorboard"]))
    """Any of ``tensorboard`` (event files in the run dir), ``wandb``, ``mlflow``, ``trackio``; [] for none."""
    project: str = Field("agentgym", min_length=1)
    """The W&B project, MLflow experiment and trackio project the run goes to."""
    run_name: str | None = None
    """The run's name in the trackers; null: the run dir's name."""
    table_rows: int = Field(16, ge=0)
    """Episodes in the sample table logged at each evaluation (the same tasks each time); 0: no table."""
    wandb: WandbSettings = WandbSettings()
    mlflow: MlflowSettings = MlflowSettings()

    @field_validator("trackers")
    @classmethod
    def _installed(cls, trackers: list[str]) -> list[str]:
        for name in trackers:
            if trackers.count(name) > 1:
                raise ValueError(f"{name} is listed twice")
            if absent := missing(PACKAGES[name]):
                raise ValueError(needs(name, absent))
        return trackers

    @model_validator(mode="after")
    def _sqlite_store(self) -> TrackingConfig:
        uri = self.mlflow.uri()
        if "mlflow" in self.trackers and (uri is None or uri.startswith("sqlite:")) and \
                (absent := missing(SQLITE_PACKAGES)):
            raise ValueError(f"logging.trackers: {needs('mlflow', absent)} (MLflow's SQLite store)")
        return self
