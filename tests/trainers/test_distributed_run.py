"""Whole runs with the trainer on two ranks: the quickstart config trains and logs each step once, and a rank
killed mid-run stops the run naming it, after which ``--resume`` goes on with no step lost or repeated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
import yaml

from agentgym.config import load_config
from agentgym.evaluation.records import ROLLOUTS
from agentgym.metrics_log import read_metrics
from agentgym.trainers import TrainConfig
from agentgym.trainers.checkpoint import latest_checkpoint, load_trainer_state
from tests.trainers.conftest import ROOT
from tests.trainers.test_train import _config, _latest_step, _logged_steps

pytest.importorskip("ray", reason="the distributed trainer needs Ray: pip install 'agentgym[ray]'")
pytestmark = pytest.mark.ray


def _leftover_ray() -> list[str]:
    found = subprocess.run(["pgrep", "-af", "raylet|gcs_server|TrainerRank"], capture_output=True, text=True, check=False)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


@pytest.mark.timeout(600)
def test_the_quickstart_on_two_ranks_trains_and_logs_each_step_once(tiny_model_dir, tmp_path, agentgym_process):
    run_dir, steps = tmp_path / "run", 5
    overrides = [f"output_dir={run_dir}", f"model.path={tiny_model_dir}", f"trainer.steps={steps}",
                 "trainer.world_size=2", "trainer.groups_per_step=4", "trainer.group_size=4",
                 "trainer.concurrency=16", "eval.episodes=8", "checkpoint.every=0"]
    run = agentgym_process("train", str(ROOT / "trainers/configs/quickstart.yaml"), *overrides, log="run.log")
    assert run.wait(timeout=540) == 0, (tmp_path / "run.log").read_text()[-3000:]

    config = load_config(TrainConfig, run_dir / "config.yaml")
    assert (config.trainer.world_size, config.trainer.parallel) == (2, "ddp")
    ranks = json.loads((run_dir / "ranks.json").read_text())
    assert [r["rank"] for r in ranks] == [0, 1] and len({r["pid"] for r in ranks}) == 2
    records = read_metrics(run_dir)
    train = [r["step"] for r in records if "train/loss" in r or "train/skipped" in r]
    assert train == list(range(1, steps + 1))  # one line per step, not one per rank
    assert [r["step"] for r in records if "eval/success_rate" in r] == [0, steps]
    csv_rows = (run_dir / "metrics.csv").read_text().splitlines()[1:]
    assert len(csv_rows) == len(records)
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    assert all(r["time/publish_seconds"] > 0 for r in records if "time/publish_seconds" in r)
    assert (run_dir / "checkpoints" / f"step-{steps:06d}" / "optimizer" / ".metadata").is_file()
    assert f"after {steps} steps" in (tmp_path / "run.log").read_text()
    assert not _leftover_ray()


@pytest.mark.timeout(900)
def test_a_killed_rank_stops_the_run_naming_it_and_resume_loses_no_step(tiny_model_dir, tmp_path,
                                                                          agentgym_process):
    steps, run_dir, config_file = 8, tmp_path / "run", tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(_config(
        run_dir, tiny_model_dir, trainer={"steps": steps, "world_size": 2, "strategy": "fsdp",
                                          "collective_timeout": 60},
        eval={"episodes": 8}, checkpoint={"every": 2, "keep": 2})))
    first = agentgym_process("train", str(config_file), log="first.log")
    deadline = time.monotonic() + 300
    while first.poll() is None and time.monotonic() < deadline:  # kill rank 1 once a step past a checkpoint ran
        if _latest_step(run_dir) >= 2 and max(_logged_steps(run_dir)) > _latest_step(run_dir):
            break
        time.sleep(0.05)
    ranks = json.loads((run_dir / "ranks.json").read_text())
    os.kill(ranks[1]["pid"], signal.SIGKILL)
    killed_at = time.monotonic()
    assert first.wait(timeout=120) == 1
    stopped_after = time.monotonic() - killed_at
    log = (tmp_path / "first.log").read_text()
    assert f"rank 1 died (pid {ranks[1]['pid']}" in log, log[-3000:]
    assert f"agentgym train --resume {run_dir}" in log
    assert stopped_after < 60  # the collective timeout: a dead peer's closed connections end the step sooner
    assert not _leftover_ray()
    kept = _latest_step(run_dir)
    assert 2 <= kept < steps and load_trainer_state(latest_checkpoint(run_dir)).step == kept

    second = agentgym_process("train", "--resume", str(run_dir), log="second.log")
    assert second.wait(timeout=600) == 0, (tmp_path / "second.log").read_text()[-3000:]
    batches = [json.loads(line) for line in (run_dir / "batches.jsonl").read_text().splitlines()]
    assert [b["step"] for b in batches] == list(range(1, steps + 1))  # none lost, none repeated
    positions = [p for b in batches for p in b["tasks"]]
    assert len(set(positions)) == len(positions)  # no task trained twice
    assert [r["step"] for r in read_metrics(run_dir) if "rollout/reward_mean" in r] == list(range(1, steps + 1))
    rollouts = [json.loads(line) for line in (run_dir / ROLLOUTS).read_text().splitlines()]
    trained = [r for r in rollouts if r["outcome"] == "trained"]
    assert {r["step"] for r in trained} == set(range(1, steps + 1))  # every step's rows, from both ranks
    assert all(len(r["trainer_logprobs"]) == len(r["trajectory"]["token_ids"]) for r in trained)
    assert not _leftover_ray()
