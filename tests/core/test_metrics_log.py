"""The metrics writer (JSONL, CSV, TensorBoard) and the learning-curve plots."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys

import pytest
from PIL import Image

from agentgym.metrics_log import MetricsLog, curves_figure, plot_curves, read_metrics


def _csv(run_dir):
    with (run_dir / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def _tensorboard_scalars(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    out = {}
    for name in sorted(os.listdir(run_dir)):
        if name.startswith("events.out.tfevents"):
            acc = EventAccumulator(str(run_dir / name), size_guidance={SCALARS: 0})
            acc.Reload()
            for tag in acc.Tags()["scalars"]:
                out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


def test_jsonl_and_csv_are_flushed_and_readable_while_open(tmp_path):
    with MetricsLog(tmp_path, tensorboard=False) as log:
        log.log(0, {"train/loss": 1.5, "rollout/finished": 4, "eval/solved": True}, wall_time=100.0)
        assert read_metrics(tmp_path) == [
            {"step": 0, "time": 100.0, "train/loss": 1.5, "rollout/finished": 4, "eval/solved": True}
        ]
        log.log(1, {"train/loss": 1.25, "rollout/finished": 5, "eval/solved": False}, wall_time=101.0)
        rows = _csv(tmp_path)
        assert list(rows[0]) == ["step", "time", "train/loss", "rollout/finished", "eval/solved"]
        assert [(r["step"], r["train/loss"], r["rollout/finished"]) for r in rows] == [("0", "1.5", "4"), ("1", "1.25", "5")]
        lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
        assert len(lines) == 2 and json.loads(lines[1])["train/loss"] == 1.25


def test_new_keys_mid_run_grow_the_csv_header(tmp_path):
    with MetricsLog(tmp_path, tensorboard=False) as log:
        log.log(0, {"train/loss": 2.0})
        log.log(1, {"train/loss": 1.0, "eval/success_rate": 0.5})
        log.log(2, {"train/loss": 0.5})
        rows = _csv(tmp_path)
    assert list(rows[0]) == ["step", "time", "train/loss", "eval/success_rate"]
    assert [r["eval/success_rate"] for r in rows] == ["", "0.5", ""]
    assert [r["train/loss"] for r in rows] == ["2.0", "1.0", "0.5"]
    assert not (tmp_path / "metrics.csv.tmp").exists()


def test_reopening_appends_and_torn_last_line_is_skipped_then_cut(tmp_path):
    with MetricsLog(tmp_path, tensorboard=False) as log:
        log.log(0, {"train/loss": 1.0})
        log.log(1, {"train/loss": 0.9})
    with (tmp_path / "metrics.jsonl").open("a") as f:  # what a kill -9 mid-write leaves behind
        f.write('{"step": 2, "time": 5.0, "train/lo')
    assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1]
    with MetricsLog(tmp_path, tensorboard=False) as log:
        assert [r["step"] for r in _csv(tmp_path)] == ["0", "1"]
        log.log(2, {"train/loss": 0.8, "train/kl": 0.01})
    assert [(r["step"], r["train/loss"]) for r in read_metrics(tmp_path)] == [(0, 1.0), (1, 0.9), (2, 0.8)]
    assert [r["train/kl"] for r in _csv(tmp_path)] == ["", "", "0.01"]


def test_complete_last_line_without_newline_is_kept(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "time": 1.0, "a": 1}\n{"step": 1, "time": 2.0, "a": 2}')
    assert [r["a"] for r in read_metrics(tmp_path)] == [1, 2]
    with MetricsLog(tmp_path, tensorboard=False) as log:
        log.log(2, {"a": 3})
    assert [r["a"] for r in read_metrics(tmp_path)] == [1, 2, 3]


def test_corrupt_middle_line_names_the_line(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "time": 1.0}\n[1, 2]\n{"step": 1, "time": 2.0}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2"):
        read_metrics(tmp_path)
    with pytest.raises(FileNotFoundError, match="run dir"):
        read_metrics(tmp_path / "missing")


def test_non_finite_values_are_null_in_jsonl_and_exact_in_tensorboard(tmp_path):
    with MetricsLog(tmp_path) as log:
        log.log(3, {"train/loss": math.nan, "train/grad_norm": math.inf, "train/kl": -math.inf, "train/lr": 1e-5})
    line = (tmp_path / "metrics.jsonl").read_text()
    assert "NaN" not in line and "Infinity" not in line
    (record,) = read_metrics(tmp_path)
    assert record["train/loss"] is None and record["train/grad_norm"] is None and record["train/lr"] == 1e-5
    assert _csv(tmp_path)[0]["train/loss"] == ""
    scalars = _tensorboard_scalars(tmp_path)
    assert math.isnan(scalars["train/loss"][0][1])
    assert scalars["train/grad_norm"] == [(3, math.inf)] and scalars["train/kl"] == [(3, -math.inf)]


def test_tensorboard_event_file_holds_every_scalar(tmp_path):
    log = MetricsLog(tmp_path)
    for step in range(5):
        log.log(step * 10, {"train/loss": 1.0 / (step + 1), "eval/success_rate": step / 4, "eval/done": step == 4})
    assert _tensorboard_scalars(tmp_path)["train/loss"][:2] == [(0, 1.0), (10, 0.5)]  # flushed while open
    log.close()
    log.close()
    scalars = _tensorboard_scalars(tmp_path)
    assert scalars["eval/success_rate"] == [(s * 10, s / 4) for s in range(5)]
    assert [v for _, v in scalars["eval/done"]] == [0.0, 0.0, 0.0, 0.0, 1.0]
    with pytest.raises(RuntimeError, match="closed"):
        log.log(60, {"train/loss": 0.1})


def test_bad_inputs_name_the_fix(tmp_path):
    with MetricsLog(tmp_path, tensorboard=False) as log:
        with pytest.raises(TypeError, match="'train/text'.*float"):
            log.log(0, {"train/text": "high"})
        with pytest.raises(ValueError, match="reserved"):
            log.log(0, {"step": 1})
        with pytest.raises(TypeError, match="step must be an int"):
            log.log(1.5, {"train/loss": 1.0})
    assert read_metrics(tmp_path) == []


def _records(n):
    return [{"step": s, "time": float(s), "train/loss": 1 / (s + 1), "eval/success_rate": (s % 7) / 7,
             "rollout/reward_mean": None if s == 3 else s * 0.1} for s in range(n)]


def test_plot_has_one_subplot_per_present_key_and_is_a_valid_deterministic_png(tmp_path):
    keys = ("eval/success_rate", "rollout/reward_mean", "train/loss", "train/absent")
    fig = curves_figure(_records(30), keys)
    assert [ax.get_title() for ax in fig.axes] == ["eval/success_rate", "rollout/reward_mean", "train/loss"]
    assert len(fig.axes[0].lines) == 2 and fig.axes[0].get_xlabel() == "step"  # raw points + EMA
    assert len(curves_figure(_records(4), keys).axes[0].lines) == 1  # few points: no smoothing
    out = plot_curves(_records(30), tmp_path / "plots" / "curves.png", keys)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    with Image.open(out) as image:
        assert image.format == "PNG" and image.size == (1100, 700)
    again = plot_curves(_records(30), tmp_path / "again.png", keys)
    assert again.read_bytes() == data


def test_plot_from_run_dir_and_errors(tmp_path):
    with MetricsLog(tmp_path, tensorboard=False) as log:
        for step in range(12):
            log.log(step, {"train/loss": 1.0 / (step + 1)})
    out = plot_curves(tmp_path, tmp_path / "curves.png")
    assert out.is_file()
    assert len(curves_figure(tmp_path, None).axes) == 1
    with pytest.raises(ValueError, match=r"available keys: \['train/loss'\]"):
        plot_curves(tmp_path, tmp_path / "none.png", ["eval/success_rate"])
    with pytest.raises(ValueError, match="smoothing"):
        curves_figure(tmp_path, smoothing=1.0)


def test_import_stays_light():
    code = ("import sys, agentgym.metrics_log; "
            "print(sorted(m for m in ('torch', 'tensorboard', 'matplotlib', 'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_kill_9_keeps_every_logged_line_and_the_run_resumes(tmp_path):
    code = f"""
import sys, time
from agentgym.metrics_log import MetricsLog
from agentgym.rollout.metrics import RolloutMetrics
log = MetricsLog({str(tmp_path)!r})
for step in range(50):
    log.log(step, RolloutMetrics(started=step, finished=step, staleness={{0: step}}).log_dict())
print("logged", flush=True)
time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "logged"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()
    records = read_metrics(tmp_path)
    assert [r["rollout/finished"] for r in records] == list(range(50)) and records[7]["rollout/staleness/0"] == 7
    assert len(_tensorboard_scalars(tmp_path)["rollout/started"]) == 50
    with MetricsLog(tmp_path, tensorboard=False) as log:
        log.log(50, {"rollout/finished": 50})
    assert [r["step"] for r in _csv(tmp_path)] == [str(s) for s in range(51)]
