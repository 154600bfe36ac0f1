"""Experiment trackers (``logging.trackers``): a short training run read back with each tracker's own reader (the
offline W&B run's ``.wandb`` file, MLflow's client, trackio's storage, TensorBoard's event reader), the tracker layer
on its own (config, metrics by step, tables, closing, resuming the same run), and the command line's refusals.
Nothing reaches the network: W&B runs offline, MLflow and trackio keep their stores in temporary folders."""

from __future__ import annotations

import io
import json
import math
import shutil
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from agentgym.cli import main
from agentgym.errors import AgentGymError
from agentgym.metrics_log import MetricsLog, read_metrics
from agentgym.tracking import STATE_FILE, Table, TrackingConfig, open_trackers
from agentgym.trainers import TrainConfig, resume, train
from tests.trainers.envs import VOWELS_ID

STEPS = 4
PROJECT = "agentgym-test"


@pytest.fixture(scope="module", autouse=True)
def offline(tmp_path_factory) -> Iterator[Path]:
    """W&B offline and quiet, trackio's store in a temporary folder, no hub: for every test of this module."""
    trackio_dir = tmp_path_factory.mktemp("trackio")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONSOLE": "off",
                            "WANDB_X_DISABLE_STATS": "true", "TRACKIO_DIR": str(trackio_dir),
                            "HF_HUB_OFFLINE": "1"}.items():
            mp.setenv(name, value)
        for name in ("WANDB_DIR", "WANDB_API_KEY", "MLFLOW_TRACKING_URI", "TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL"):
            mp.delenv(name, raising=False)
        import trackio.utils

        if trackio.utils.TRACKIO_DIR != trackio_dir:  # imported earlier in this process: its paths were bound then
            for module in [m for name, m in sys.modules.items() if name.split(".")[0] == "trackio"]:
                for name, path in {"TRACKIO_DIR": trackio_dir, "MEDIA_DIR": trackio_dir / "media",
                                   "ARTIFACTS_DIR": trackio_dir / "artifacts"}.items():
                    if hasattr(module, name):
                        mp.setattr(module, name, path)
        assert trackio.utils.TRACKIO_DIR == trackio_dir
        yield trackio_dir


def _config(output_dir: Path, model_dir: Path, **logging: Any) -> dict[str, Any]:
    """A Vowels run of a few CPU seconds, evaluated before, halfway and at the end."""
    return {
        "output_dir": str(output_dir),
        "model": {"path": str(model_dir)},
        "env": {"id": VOWELS_ID},
        "sampling": {"max_tokens": 12},
        "optim": {"lr": 3e-3},
        "trainer": {"steps": STEPS, "groups_per_step": 2, "group_size": 4, "concurrency": 8, "async_ratio": 1},
        "eval": {"episodes": 12, "every": STEPS // 2},
        "checkpoint": {"every": STEPS // 2},
        "logging": {"project": PROJECT, "wandb": {"mode": "offline"}, **logging},
    }


@dataclass(frozen=True)
class Tracked:
    config: TrainConfig
    trackio_logs: list[dict[str, Any]]
    """What trackio holds of the run right after it (its store is shared, and a resumed copy adds to the run)."""
    trackio_config: dict[str, Any]


@pytest.fixture(scope="module")
def tracked_run(tiny_model_dir, tmp_path_factory) -> Tracked:
    """One short training run sent to all four trackers."""
    from trackio.sqlite_storage import SQLiteStorage

    data = _config(tmp_path_factory.mktemp("tracked") / "run", tiny_model_dir,
                   trackers=["tensorboard", "wandb", "mlflow", "trackio"], table_rows=5)
    config = TrainConfig.model_validate(data)
    train(config, console=Console(file=io.StringIO()))
    name = config.run_dir.name
    return Tracked(config, SQLiteStorage.get_logs(PROJECT, name), SQLiteStorage.get_run_config(PROJECT, name))


def _logged(run_dir: Path, key: str) -> list[tuple[int, float]]:
    """``(step, value)`` of ``key`` in ``metrics.jsonl``, the record the trackers are checked against."""
    return [(r["step"], r[key]) for r in read_metrics(run_dir) if r.get(key) is not None]


EVAL_STEPS = [0, STEPS // 2, STEPS]


def _same_curve(got: list[tuple[int, float]], run_dir: Path, key: str) -> bool:
    """Whether ``got`` has the steps and (to float32 precision, TensorBoard's) the values of ``key`` in the JSONL."""
    want = _logged(run_dir, key)
    return [s for s, _ in got] == [s for s, _ in want] and \
        [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6, abs=1e-7)


# --- W&B: the offline run's transaction log, read with W&B's protobuf records -------------------------------------

def wandb_records(path: Path) -> list[Any]:
    """The records of a ``.wandb`` file: a 7-byte header (``:W&B``, magic, version), then LevelDB-log blocks of
    32 KiB whose chunks (checksum, length, type: full, first, middle, last) carry serialized ``Record`` protos."""
    from wandb.proto import wandb_internal_pb2

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    records, parts, pos = [], [], 7
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            break
        parts.append(data[pos + 7:pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):  # full or last: a whole record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(parts))
            records.append(record)
            parts = []
    return records


def _wandb_run(run_dir: Path) -> tuple[Path, list[Any]]:
    (folder,) = (run_dir / "wandb").glob("offline-run-*")
    (log,) = folder.glob("run-*.wandb")
    return folder, wandb_records(log)


def _wandb_history(records: list[Any]) -> list[dict[str, Any]]:
    return [{"/".join(item.nested_key) or item.key: json.loads(item.value_json) for item in r.history.item}
            for r in records if r.WhichOneof("record_type") == "history"]


def _wandb_config(records: list[Any]) -> dict[str, Any]:
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    for r in records:
        if r.WhichOneof("record_type") == "config":
            config.update({item.key: json.loads(item.value_json) for item in r.config.update})
    return config


def test_wandb_offline_holds_the_metrics_by_step_the_config_and_a_table_per_evaluation(tracked_run):
    run_dir = tracked_run.config.run_dir
    folder, records = _wandb_run(run_dir)
    state = json.loads((run_dir / STATE_FILE).read_text())
    assert folder.name.endswith(state["wandb"]["id"])
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run.project == PROJECT and run.display_name == run_dir.name

    history = _wandb_history(records)
    for key in ("train/loss", "rollout/reward_mean", "eval/success_rate", "eval/reward_mean"):
        assert _same_curve([(h["step"], h[key]) for h in history if key in h], run_dir, key), key
    assert [h["step"] for h in history if "eval/success_rate" in h] == EVAL_STEPS
    metrics = [r.metric for r in records if r.WhichOneof("record_type") == "metric"]
    assert any(m.glob_name == "*" and m.step_metric == "step" for m in metrics)  # every chart's x-axis: our step

    config = _wandb_config(records)
    assert config["trainer"]["steps"] == STEPS and config["env"]["id"] == VOWELS_ID
    assert config["logging"]["trackers"] == ["tensorboard", "wandb", "mlflow", "trackio"]

    tables = [h for h in history if h.get("eval/episodes/_type") == "table-file"]
    assert [h["step"] for h in tables] == EVAL_STEPS
    table = json.loads((folder / "files" / tables[-1]["eval/episodes/path"]).read_text())
    assert table["columns"] == ["task_id", "env_id", "difficulty", "status", "success", "reward", "turns",
                                "last_action"]
    assert len(table["data"]) == 5 and all(row[1] == VOWELS_ID for row in table["data"])


# --- MLflow: the run dir's SQLite store, read with MLflow's client ------------------------------------------------

def test_mlflow_holds_the_metrics_by_step_the_config_as_params_and_a_table_per_evaluation(tracked_run):
    from mlflow.tracking import MlflowClient

    run_dir = tracked_run.config.run_dir
    state = json.loads((run_dir / STATE_FILE).read_text())["mlflow"]
    assert state["tracking_uri"] == f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
    client = MlflowClient(state["tracking_uri"])
    run = client.get_run(state["run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    assert client.get_experiment(run.info.experiment_id).name == PROJECT

    for key in ("train/loss", "rollout/reward_mean", "eval/success_rate", "time/step_seconds"):
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        assert _same_curve(history, run_dir, key), key
    assert [m.step for m in client.get_metric_history(run.info.run_id, "eval/success_rate")] == EVAL_STEPS

    params = run.data.params
    assert params["trainer.steps"] == str(STEPS) and params["env.id"] == VOWELS_ID
    assert params["logging.trackers"] == str(["tensorboard", "wandb", "mlflow", "trackio"])
    config = json.loads(Path(client.download_artifacts(run.info.run_id, "config.json")).read_text())
    assert config == tracked_run.config.model_dump(mode="json")

    tables = sorted(a.path for a in client.list_artifacts(run.info.run_id, "eval/episodes"))
    assert tables == [f"eval/episodes/step-{s:06d}.json" for s in EVAL_STEPS]
    table = json.loads(Path(client.download_artifacts(run.info.run_id, tables[-1])).read_text())
    assert table["columns"][:2] == ["task_id", "env_id"] and len(table["data"]) == 5
    assert (run_dir / "mlartifacts").is_dir()  # the artifacts stay in the run dir too


# --- trackio and TensorBoard ---------------------------------------------------------------------------------------

def test_trackio_holds_the_metrics_by_step_the_config_and_a_table_per_evaluation(tracked_run):
    run_dir = tracked_run.config.run_dir
    state = json.loads((run_dir / STATE_FILE).read_text())["trackio"]
    assert state["project"] == PROJECT and state["name"] == run_dir.name
    logs = tracked_run.trackio_logs
    for key in ("train/loss", "eval/success_rate"):
        assert _same_curve([(r["step"], r[key]) for r in logs if key in r], run_dir, key), key
    tables = [(r["step"], r["eval/episodes"]) for r in logs if "eval/episodes" in r]
    assert [step for step, _ in tables] == EVAL_STEPS
    assert tables[-1][1]["_type"] == "trackio.table" and len(tables[-1][1]["_value"]) == 5
    assert tracked_run.trackio_config["trainer"]["steps"] == STEPS


def _tensorboard(run_dir: Path) -> Any:
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, TENSORS, EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0, TENSORS: 0})
    accumulator.Reload()
    return accumulator


def test_tensorboard_holds_the_scalars_the_config_and_a_text_table_per_evaluation(tracked_run):
    run_dir = tracked_run.config.run_dir
    events = _tensorboard(run_dir)
    scalars = [(e.step, e.value) for e in events.Scalars("eval/success_rate")]
    assert _same_curve(scalars, run_dir, "eval/success_rate")
    tables = events.Tensors("eval/episodes")
    assert [e.step for e in tables] == EVAL_STEPS
    text = tables[-1].tensor_proto.string_val[0].decode()
    assert text.startswith("| task_id | env_id |") and text.count("\n") == 2 + 5 - 1
    config = events.Tensors("config")[0].tensor_proto.string_val[0].decode()
    assert json.loads(config)["trainer"]["steps"] == STEPS


def test_a_resumed_run_continues_the_same_tracker_runs(tracked_run, tmp_path):
    """Resumed from its halfway checkpoint in a copy of its run dir (its stores move with it), the run goes on in
    the same W&B, MLflow and trackio runs, which then hold the steps after the checkpoint twice."""
    from mlflow.tracking import MlflowClient
    from trackio.sqlite_storage import SQLiteStorage

    run_dir = tmp_path / "copy"
    shutil.copytree(tracked_run.config.run_dir, run_dir)
    (run_dir / "checkpoints" / "latest").write_text(f"step-{STEPS // 2:06d}\n")
    before = json.loads((run_dir / STATE_FILE).read_text())
    resume(run_dir, console=Console(file=io.StringIO()))
    after = json.loads((run_dir / STATE_FILE).read_text())
    assert after["mlflow"] == {**before["mlflow"], "tracking_uri": f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"}
    assert after["wandb"] == before["wandb"] and after["trackio"] == before["trackio"]
    again = list(range(STEPS // 2 + 1, STEPS + 1))

    first, second = sorted((run_dir / "wandb").glob("offline-run-*"))  # wandb sync uploads both to the one run
    assert first.name.endswith(before["wandb"]["id"]) and second.name.endswith(before["wandb"]["id"])
    history = _wandb_history(wandb_records(next(second.glob("run-*.wandb"))))
    assert [h["step"] for h in history if "train/loss" in h] == again
    assert [h["step"] for h in history if "eval/success_rate" in h] == [STEPS]

    client = MlflowClient(f"sqlite:///{(run_dir / 'mlflow.db').resolve()}")
    (run,) = client.search_runs([client.get_experiment_by_name(PROJECT).experiment_id])
    assert run.info.run_id == before["mlflow"]["run_id"] and run.info.status == "FINISHED"
    steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "train/loss"))
    assert steps == sorted([*range(1, STEPS + 1), *again])

    logs = SQLiteStorage.get_logs(PROJECT, before["trackio"]["name"])
    assert [r["step"] for r in logs if "train/loss" in r] == [*range(1, STEPS + 1), *again]
    assert SQLiteStorage.get_runs(PROJECT).count(before["trackio"]["name"]) == 1


# --- the tracker layer on its own ---------------------------------------------------------------------------------

def _settings(**values: Any) -> TrackingConfig:
    return TrackingConfig.model_validate({"project": PROJECT, "wandb": {"mode": "offline"}, **values})


def test_trackers_log_the_config_metrics_and_tables_and_close_once(tmp_path):
    from mlflow.tracking import MlflowClient

    settings = _settings(trackers=["wandb", "mlflow", "trackio"], run_name="unit")
    config = {"trainer": {"steps": 3, "lr": 1e-3}, "tags": ["a", "b"]}
    table = Table("eval/episodes", ("task_id", "success"), (("t-1", True), ("t-2", False)))
    with MetricsLog(tmp_path, trackers=open_trackers(settings, tmp_path, config)) as log:
        assert [t.name for t in log.trackers] == ["wandb", "mlflow", "trackio"]
        log.log(0, {"eval/success_rate": 0.25}, wall_time=1000.0)
        log.log(1, {"train/loss": 2.0, "train/kl": math.inf})
        log.log(2, {"train/loss": 1.0, "eval/success_rate": 0.5, "eval/done": True})
        log.log_table(2, table)
    trackers = log.trackers
    for tracker in trackers:
        tracker.close()  # closed already: nothing happens
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.log_table(3, table)

    state = json.loads((tmp_path / STATE_FILE).read_text())
    _, records = _wandb_run(tmp_path)
    history = _wandb_history(records)
    assert [(h["step"], h["train/loss"]) for h in history if "train/loss" in h] == [(1, 2.0), (2, 1.0)]
    assert [h["eval/episodes/nrows"] for h in history if "eval/episodes/nrows" in h] == [2]
    assert _wandb_config(records)["trainer"] == {"steps": 3, "lr": 1e-3}
    (exit_record,) = [r.exit for r in records if r.WhichOneof("record_type") == "exit"]
    assert exit_record.exit_code == 0

    client = MlflowClient(state["mlflow"]["tracking_uri"])
    run = client.get_run(state["mlflow"]["run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == "unit"
    assert run.data.params == {"trainer.steps": "3", "trainer.lr": "0.001", "tags": "['a', 'b']"}
    success = sorted((m.step, m.value, m.timestamp) for m in client.get_metric_history(run.info.run_id,
                                                                                          "eval/success_rate"))
    assert [(step, value) for step, value, _ in success] == [(0, 0.25), (2, 0.5)]
    assert success[0][2] == 1_000_000  # the record's wall time, in milliseconds
    assert [m.value for m in client.get_metric_history(run.info.run_id, "eval/done")] == [1.0]
    assert client.get_metric_history(run.info.run_id, "train/kl")[0].value > 1e308  # MLflow's infinity
    (artifact,) = client.list_artifacts(run.info.run_id, "eval/episodes")
    stored = json.loads(Path(client.download_artifacts(run.info.run_id, artifact.path)).read_text())
    assert stored == {"columns": ["task_id", "success"], "data": [["t-1", True], ["t-2", False]]}

    from trackio.sqlite_storage import SQLiteStorage

    logs = SQLiteStorage.get_logs(PROJECT, "unit")
    assert [(r["step"], r["train/loss"]) for r in logs if "train/loss" in r] == [(1, 2.0), (2, 1.0)]
    assert SQLiteStorage.get_run_config(PROJECT, "unit")["trainer"] == {"steps": 3, "lr": 1e-3}


def test_reopened_trackers_continue_the_same_runs(tmp_path):
    from mlflow.tracking import MlflowClient

    settings = _settings(trackers=["wandb", "mlflow", "trackio"], run_name="resumed")
    with MetricsLog(tmp_path, trackers=open_trackers(settings, tmp_path, {"seed": 1})) as log:
        log.log(1, {"train/loss": 3.0})
        log.log(2, {"train/loss": 2.0})
    first = json.loads((tmp_path / STATE_FILE).read_text())
    with MetricsLog(tmp_path, trackers=open_trackers(settings, tmp_path, {"seed": 1})) as log:
        log.log(2, {"train/loss": 1.5})  # the step after the checkpoint, played again
        log.log(3, {"train/loss": 1.0})
    assert json.loads((tmp_path / STATE_FILE).read_text()) == first

    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(folders) == 2 and all(f.name.endswith(first["wandb"]["id"]) for f in folders)
    client = MlflowClient(first["mlflow"]["tracking_uri"])
    (run,) = client.search_runs([client.get_experiment_by_name(PROJECT).experiment_id])
    assert run.info.run_id == first["mlflow"]["run_id"] and run.info.status == "FINISHED"
    assert sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss")) == \
        [(1, 3.0), (2, 1.5), (2, 2.0), (3, 1.0)]

    from trackio.sqlite_storage import SQLiteStorage

    assert SQLiteStorage.get_runs(PROJECT).count("resumed") == 1
    assert [r["step"] for r in SQLiteStorage.get_logs(PROJECT, "resumed") if "train/loss" in r] == [1, 2, 2, 3]


def test_a_failed_run_is_marked_failed(tmp_path):
    from mlflow.tracking import MlflowClient

    settings = _settings(trackers=["mlflow"])
    with pytest.raises(ZeroDivisionError), MetricsLog(tmp_path, trackers=open_trackers(settings, tmp_path, {})) as log:
        log.log(1, {"train/loss": 1.0})
        _ = 1 / 0
    state = json.loads((tmp_path / STATE_FILE).read_text())["mlflow"]
    assert MlflowClient(state["tracking_uri"]).get_run(state["run_id"]).info.status == "FAILED"


def test_no_trackers_writes_only_the_metrics_files(tmp_path):
    with MetricsLog(tmp_path, trackers=open_trackers(_settings(trackers=[]), tmp_path, {})) as log:
        log.log(1, {"train/loss": 1.0})
        log.log_table(1, Table("eval/episodes", ("a",), ((1,),)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv", "metrics.jsonl"]


def test_a_tracker_that_cannot_import_names_the_install(tmp_path, monkeypatch):
    settings = _settings(trackers=["wandb"])
    monkeypatch.setitem(sys.modules, "wandb", None)
    monkeypatch.delitem(sys.modules, "agentgym.tracking.wandb", raising=False)
    with pytest.raises(AgentGymError, match=r"^logging.trackers: wandb needs the wandb package: "
                                            r"pip install 'agentgym\[trackers\]'$"):
        open_trackers(settings, tmp_path, {})


# --- the command line ------------------------------------------------------------------------------------------------

def _agentgym(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["agentgym", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, capsys.readouterr().err


@pytest.mark.parametrize("missing", ["trackio", "wandb", "mlflow"])
def test_a_missing_tracker_package_exits_2_naming_the_key_and_the_install(tiny_model_dir, tmp_path, monkeypatch,
                                                                           capsys, missing):
    config_file = tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(_config(tmp_path / "run", tiny_model_dir)))
    monkeypatch.setitem(sys.modules, missing, None)  # what Python does for a package that is not installed
    code, err = _agentgym(monkeypatch, capsys, "train", str(config_file), f"logging.trackers=[tensorboard, {missing}]")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "logging.trackers" in err and f"{missing} needs the {missing} package" in err
    assert "pip install 'agentgym[trackers]'" in err
    assert not (tmp_path / "run").exists()


def test_mlflow_without_its_sqlite_store_packages_exits_2(tiny_model_dir, tmp_path, monkeypatch, capsys):
    config_file = tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(_config(tmp_path / "run", tiny_model_dir, trackers=["mlflow"])))
    monkeypatch.setitem(sys.modules, "alembic", None)
    code, err = _agentgym(monkeypatch, capsys, "train", str(config_file))
    assert code == 2 and "logging.trackers: mlflow needs the alembic package" in err
    code, err = _agentgym(monkeypatch, capsys, "train", str(config_file), "logging.mlflow.tracking_uri=http://mlflow:5000",
                          "env.id=test/Nowhere-v0")
    assert code == 1 and "test/Nowhere-v0" in err  # a server needs no SQLite store: the config passes


@pytest.mark.parametrize(
    ("override", "key"),
    [("logging.trackers=[neptune]", "logging.trackers"), ("logging.trackers=[wandb, wandb]", "logging.trackers"),
     ("logging.trackers=wandb", "logging.trackers"), ("logging.wandb.mode=cloud", "logging.wandb.mode"),
     ("logging.table_rows=-1", "logging.table_rows"), ("logging.tracker=[wandb]", "logging.tracker")],
)
def test_a_bad_logging_value_exits_2_naming_the_key(tiny_model_dir, tmp_path, monkeypatch, capsys, override, key):
    config_file = tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(_config(tmp_path / "run", tiny_model_dir)))
    code, err = _agentgym(monkeypatch, capsys, "train", str(config_file), override)
    assert code == 2 and err.startswith(f"agentgym: error: {key}") and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_tensorboard_left_out_writes_no_events(tiny_model_dir, tmp_path):
    config = TrainConfig.model_validate({**_config(tmp_path / "run", tiny_model_dir, trackers=[]),
                                         "trainer": {"steps": 1, "groups_per_step": 1, "group_size": 2,
                                                     "concurrency": 2}, "eval": {"episodes": 2}})
    train(config, console=Console(file=io.StringIO()))
    assert not list(config.run_dir.glob("events.out.tfevents.*")) and not (config.run_dir / STATE_FILE).exists()
    assert [r["step"] for r in read_metrics(config.run_dir) if "eval/success_rate" in r] == [0, 1]


def test_an_sft_run_reaches_the_trackers(tiny_model_dir, tmp_path):
    from mlflow.tracking import MlflowClient

    from agentgym.config import load_config
    from agentgym.trainers.sft import SFTRunConfig, run_sft

    out = tmp_path / "sft"
    config = load_config(SFTRunConfig, None, [
        f"model={tiny_model_dir}", f"output_dir={out}", "data.episodes=4", "data.difficulties=[easy]",
        "trl.max_steps=3", "trl.logging_steps=1", f"logging.project={PROJECT}", "logging.trackers=[wandb, mlflow]",
        "logging.wandb.mode=offline"])
    run_sft(config)
    losses = _logged(out, "sft/loss")
    assert [step for step, _ in losses] == [1, 2, 3]
    _, records = _wandb_run(out)
    assert _same_curve([(h["step"], h["sft/loss"]) for h in _wandb_history(records) if "sft/loss" in h], out,
                       "sft/loss")
    assert _wandb_config(records)["trl"]["max_steps"] == 3
    state = json.loads((out / STATE_FILE).read_text())["mlflow"]
    client = MlflowClient(state["tracking_uri"])
    history = sorted((m.step, m.value) for m in client.get_metric_history(state["run_id"], "sft/loss"))
    assert _same_curve(history, out, "sft/loss")
    assert client.get_run(state["run_id"]).data.params["trl.max_steps"] == "3"
    assert not list(out.glob("events.out.tfevents.*"))


def test_the_training_page_shows_a_valid_logging_section():
    from tests.test_readme import find

    block = find("docs/training.md", "yaml", "trackers: [tensorboard, wandb, mlflow]")
    settings = TrackingConfig.model_validate(yaml.safe_load(block.code)["logging"])
    assert settings.trackers == ["tensorboard", "wandb", "mlflow"] and settings.wandb.mode == "offline"
    assert TrackingConfig().trackers == ["tensorboard"]  # the default the page names
