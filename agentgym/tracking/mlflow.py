"""MLflow: one MLflow run per training run, in the experiment named by ``logging.project``, continued on resume.

Through ``MlflowClient`` alone (no active-run state in the process). Without a tracking URI the store is a SQLite
database in the run dir (``mlflow.db``, artifacts in ``mlartifacts/``): MLflow's own kind of default store, no
server needed; ``mlflow ui --backend-store-uri sqlite:///RUN_DIR/mlflow.db`` shows it. The config goes in as
params (dotted keys, ``trainer.steps``) and whole as the ``config.json`` artifact; each evaluation's sample of
episodes as a table artifact (``eval/episodes/step-000010.json``, MLflow's ``log_table``).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlflow.entities import Metric, Param
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.tracking import MlflowClient

if TYPE_CHECKING:
    from agentgym.tracking import Table
    from agentgym.tracking.config import MlflowSettings

DB_FILE = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"
_METRICS_PER_BATCH = 1000
_PARAMS_PER_BATCH = 100
_PARAM_CHARS = 6000
"""MLflow's limits on a ``log_batch`` call and on a param's value."""


class MlflowTracker:
    """An MLflow run holding the config as params; ``saved``: the ``{"run_id": ...}`` of a run to continue, where
    the store holds it."""

    name = "mlflow"

    def __init__(self, project: str, run_name: str, run_dir: Path, config: Mapping[str, Any],
                 settings: MlflowSettings, saved: Mapping[str, Any] | None = None) -> None:
        uri = settings.uri()
        artifacts = None
        if uri is None:
            uri, artifacts = f"sqlite:///{(run_dir / DB_FILE).resolve()}", (run_dir / ARTIFACTS_DIR).resolve().as_uri()
        self.tracking_uri = uri
        self.client = MlflowClient(uri)
        run_id = saved.get("run_id") if saved else None
        if run_id and self._stored(run_id):  # the store holds it (a moved run dir moves its SQLite store along)
            self.run_id: str = run_id
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            experiment = self.client.get_experiment_by_name(project)
            experiment_id = experiment.experiment_id if experiment else \
                self.client.create_experiment(project, artifact_location=artifacts)
            self.run_id = self.client.create_run(experiment_id, run_name=run_name).info.run_id
            self._log_config(config)
        self._closed = False

    @property
    def state(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "tracking_uri": self.tracking_uri}

    def _stored(self, run_id: str) -> bool:
        try:
            self.client.get_run(run_id)
        except MlflowException as error:
            if error.error_code == ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
                return False
            raise
        return True

    def _log_config(self, config: Mapping[str, Any]) -> None:
        from agentgym.tracking import flatten

        params = [Param(_key(key), str(value)[:_PARAM_CHARS]) for key, value in flatten(config).items()]
        for start in range(0, len(params), _PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=params[start:start + _PARAMS_PER_BATCH])
        self.client.log_dict(self.run_id, dict(config), "config.json")

    def log(self, step: int, metrics: Mapping[str, float | int | bool], wall_time: float) -> None:
        stamp = int(wall_time * 1000)
        values = [Metric(_key(key), _finite(float(value)), stamp, step) for key, value in metrics.items()]
        for start in range(0, len(values), _METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=values[start:start + _METRICS_PER_BATCH])

    def log_table(self, step: int, table: Table) -> None:
        data = {column: [row[i] for row in table.rows] for i, column in enumerate(table.columns)}
        self.client.log_table(self.run_id, data, f"{_key(table.key)}/step-{step:06d}.json")

    def close(self, *, failed: bool = False) -> None:
        if not self._closed:
            self._closed = True
            self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED", int(time.time() * 1000))


def _key(key: str) -> str:
    """``key`` with the characters MLflow refuses in a metric or param name made ``_``."""
    return re.sub(r"[^/\w.\- :]", "_", key)


def _finite(value: float) -> float:
    """NaN as is (MLflow stores it); infinities as the largest float, which is what MLflow keeps of them."""
    return value if math.isfinite(value) or math.isnan(value) else math.copysign(1.7976931348623157e308, value)
