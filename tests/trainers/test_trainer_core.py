"""The decoupled trainer end to end: a short CPU run moves the policy, kill -9 and resume lose and
double nothing, and bad configs exit 2 naming the key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from agentgym.trainers import TrainConfig, train
from agentgym.trainers.batch import collate
from agentgym.trainers.checkpoint import DataPosition
from agentgym.trajectory import Trajectory
from tests.trainers.envs import VOWELS_ID

ROOT = Path(__file__).resolve().parents[2]


def _config(model: Path, out: Path, **trainer: object) -> dict:
    return {
        "output_dir": str(out),
        "model": {"path": str(model)},
        "env": {"id": VOWELS_ID},
        "sampling": {"max_tokens": 12},
        "optim": {"lr": 3.0e-3},
        "trainer": {"steps": 8, "groups_per_step": 4, "group_size": 4, "concurrency": 16, "async_ratio": 1,
                    **trainer},
        "eval": {"episodes": 32},
        "checkpoint": {"every": 0},
    }


def _records(run_dir: Path, name: str = "metrics.jsonl") -> list[dict]:
    return [json.loads(line) for line in (run_dir / name).read_text().splitlines()]


def test_collate_aligns_each_token_with_its_prediction() -> None:
    t = Trajectory(env_id="x", token_ids=[5, 6, 7, 8], loss_mask=[0, 0, 1, 1], logprobs=[0, 0, -0.5, -0.25],
                   versions=[-1, -1, 3, 4])
    short = Trajectory(env_id="x", token_ids=[9, 10], loss_mask=[0, 1], logprobs=[0, -1.0], versions=[-1, 2])
    batch = collate([short, t], torch.tensor([1.0, -1.0]), pad_id=0)
    assert batch.input_ids.tolist() == [[5, 6, 7, 8], [9, 10, 0, 0]]  # longest first
    assert batch.advantages.tolist() == [-1.0, 1.0]
    assert batch.loss_mask.tolist() == [[0, 1, 1], [1, 0, 0]]  # [t] describes token t+1
    assert batch.behaviour_logprobs[0].tolist() == [0, -0.5, -0.25]
    assert batch.versions.tolist() == [[-1, 3, 4], [2, -1, -1]]
    second = list(batch.micro_batches(1))[1]
    assert second.input_ids.shape == (1, 2)  # cut to its own length
    with pytest.raises(ValueError, match="advantages"):
        collate([t], torch.zeros(2), pad_id=0)


def test_data_position_tracks_out_of_order_consumption() -> None:
    data = DataPosition()
    for position in (0, 2, 5):
        data.consume(position)
    assert (data.low, data.pending(), data.next) == (1, [1, 3, 4], 6)
    assert DataPosition.from_state(data.state()) == data


@pytest.mark.parametrize("async_ratio", [0, 1])
def test_short_training_run_moves_the_policy_toward_reward(tiny_model_dir: Path, tmp_path: Path,
                                                           async_ratio: int) -> None:
    config = TrainConfig.model_validate(_config(tiny_model_dir, tmp_path / "run", async_ratio=async_ratio))
    result = train(config)
    records = _records(tmp_path / "run")
    evals = [r for r in records if "eval/reward_mean" in r]
    steps = [r for r in records if "train/loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 9))
    # the same held-out tasks and sampling seeds before and after: the difference is the policy's
    assert evals[-1]["eval/reward_mean"] > evals[0]["eval/reward_mean"]
    assert all(torch.isfinite(torch.tensor(r["train/loss"])) for r in steps)
    if async_ratio == 0:
        assert all(r["train/stale_token_fraction"] == 0 for r in steps)
    else:
        assert any(r["train/stale_token_fraction"] > 0 for r in steps)
        assert all(r["train/old_logprobs_missing_fraction"] == 0 for r in steps)
    assert result.steps == 8
    for name in ("config.yaml", "metrics.csv", "curves.png", "report.md", "summary.json", "batches.jsonl"):
        assert (tmp_path / "run" / name).stat().st_size > 0
    assert list((tmp_path / "run").glob("events.out.tfevents.*"))
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text().strip() == "step-000008"


def _agentgym(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "agentgym", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_kill_and_resume_lose_and_double_nothing(tiny_model_dir: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    data = _config(tiny_model_dir, run_dir, steps=10, async_ratio=2)
    data["checkpoint"] = {"every": 1}
    data["eval"] = {"episodes": 8}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    proc = _agentgym("train", str(tmp_path / "c.yaml"))
    latest = run_dir / "checkpoints" / "latest"
    deadline = time.monotonic() + 100
    while not (latest.exists() and latest.read_text().strip() >= "step-000003"):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = int(latest.read_text().strip().split("-")[1])
    assert killed_at < 10
    resumed = _agentgym("train", "--resume", str(run_dir))
    out, err = resumed.communicate(timeout=110)
    assert resumed.returncode == 0, err[-2000:]
    batches = _records(run_dir, "batches.jsonl")
    assert [b["step"] for b in batches] == list(range(1, 11))
    positions = [p for b in batches for p in b["tasks"]]
    assert len(positions) == len(set(positions)) == 10 * 4
    assert [r["step"] for r in _records(run_dir) if "train/loss" in r] == list(range(1, 11))
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 10


@pytest.mark.parametrize(("override", "key"), [("trainer.stepz=3", "trainer.stepz"), ("optim.lr=-1", "optim.lr")])
def test_bad_config_exits_2_naming_the_key(tiny_model_dir: Path, tmp_path: Path, override: str, key: str) -> None:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_config(tiny_model_dir, tmp_path / "run")))
    out, err = (proc := _agentgym("train", str(tmp_path / "c.yaml"), override)).communicate(timeout=60)
    assert proc.returncode == 2
    assert key in err
    assert not (tmp_path / "run").exists()


def test_a_run_dir_with_a_run_is_not_overwritten(tiny_model_dir: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("kept")
    config = TrainConfig.model_validate(_config(tiny_model_dir, run_dir))
    with pytest.raises(Exception, match="--resume"):
        train(config)
    assert (run_dir / "config.yaml").read_text() == "kept"
