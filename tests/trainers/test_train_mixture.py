"""Whole runs on a mixture of environments: per-environment metrics and evaluation, dynamic sampling that
never trains on a group without signal and gives up within its bound, a curriculum that survives kill -9,
and a resumed mixture run replaying the episodes of an uninterrupted one."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from agentgym.errors import AgentGymError
from agentgym.metrics_log import read_metrics
from agentgym.trainers import resume
from agentgym.trainers.checkpoint import latest_checkpoint, load_trainer_state
from tests.trainers.envs import LEVELS_ID, VOWELS_ID
from tests.trainers.test_train import _agentgym, _batches, _config, _latest_step, _logged_steps, _train

LEVELS = ["easy", "medium", "hard"]
MIXTURE = [{"id": VOWELS_ID, "weight": 1.0}, {"id": LEVELS_ID, "difficulties": LEVELS, "weight": 2.0}]


def _mixture(tmp_path: Path, model: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    data = _config(tmp_path / "run", model, **sections)
    data["env"] = MIXTURE
    return data


def test_a_mixture_run_reports_each_environment_and_level(tiny_model_dir, tmp_path):
    config, _result = _train(_mixture(tmp_path, tiny_model_dir, trainer={"steps": 4}, eval={"episodes": 6},
                                     algorithm={"dynamic_sampling": True}, curriculum={"min_episodes": 2}))
    records = [r for r in read_metrics(config.run_dir) if "rollout/reward_mean" in r]
    assert len(records) == 4
    for record in records:
        assert record["rollout/mixed_group_fraction"] == 1.0  # every trained group carried signal
        assert record["rollout/distinct_action_sequences"] >= 2  # so no group walked one path
        assert record["dynamic/drawn_groups"] >= 4
        assert {f"curriculum/{LEVELS_ID}/share_{level}" for level in LEVELS} <= set(record)
    assert sum(r["dynamic/dropped_groups"] for r in records) > 0  # easy and hard groups of Levels were dropped
    assert any(f"rollout/{VOWELS_ID}/reward_mean" in r for r in records)
    assert any(f"rollout/{LEVELS_ID}/success_medium" in r for r in records)
    evals = [r for r in read_metrics(config.run_dir) if "eval/success_rate" in r]
    assert [r["step"] for r in evals] == [0, 4]
    for record in evals:
        assert record[f"eval/{LEVELS_ID}/success_easy"] == 1.0 and record[f"eval/{LEVELS_ID}/success_hard"] == 0.0
        assert f"eval/{VOWELS_ID}/reward_mean" in record
    summary = json.loads((config.run_dir / "summary.json").read_text())
    assert set(summary["success_by_env"]) == {VOWELS_ID, LEVELS_ID}
    assert f"| {LEVELS_ID} |" in (config.run_dir / "report.md").read_text()
    batches = _batches(config.run_dir)
    positions = [p for b in batches for p in [*b["tasks"], *b["dropped"], *b["failed"]]]
    assert len(positions) == len(set(positions))  # dropped groups are consumed, never trained later


def test_dynamic_sampling_gives_up_within_its_bound_when_no_group_has_signal(tiny_model_dir, tmp_path):
    data = _config(tmp_path / "run", tiny_model_dir, eval={"episodes": 0},
                   algorithm={"dynamic_sampling": True, "dynamic_sampling_draws": 2})
    data["env"] = {"id": LEVELS_ID, "difficulties": ["easy"]}  # every episode succeeds: no group has signal
    with pytest.raises(AgentGymError, match=r"dynamic sampling gave up after 8 groups .* mean reward was 1\.00"):
        _train(data)  # its bound: dynamic_sampling_draws (2) x groups_per_step (4) groups, not a time


def test_a_curriculum_survives_kill_9_and_resume(tiny_model_dir, tmp_path, agentgym_process):
    steps, run_dir, config_file = 10, tmp_path / "run", tmp_path / "train.yaml"
    data = _mixture(tmp_path, tiny_model_dir, trainer={"steps": steps}, eval={"episodes": 0},
                    checkpoint={"every": 2, "keep": 2}, curriculum={"min_episodes": 2, "rate": 0.5})
    config_file.write_text(yaml.safe_dump(data))
    first = agentgym_process("train", str(config_file), log="first.log")
    deadline = time.monotonic() + 90
    while first.poll() is None and time.monotonic() < deadline:  # kill it once it has logged past a checkpoint
        if _latest_step(run_dir) >= 3 and max(_logged_steps(run_dir)) > _latest_step(run_dir):
            break
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert first.returncode == -signal.SIGKILL, (tmp_path / "first.log").read_text()[-2000:]
    kept = _latest_step(run_dir)
    saved = load_trainer_state(latest_checkpoint(run_dir)).sampler["curriculum"]
    logged = next(r for r in read_metrics(run_dir) if r["step"] == kept and "rollout/reward_mean" in r)
    assert [logged[f"curriculum/{LEVELS_ID}/share_{level}"] for level in LEVELS] == saved["mix"][LEVELS_ID]
    assert saved["mix"][LEVELS_ID] != [1 / 3] * 3  # it had moved before the kill

    second = agentgym_process("train", "--resume", str(run_dir), log="second.log")
    assert second.wait(timeout=120) == 0, (tmp_path / "second.log").read_text()[-2000:]
    batches = _batches(run_dir)
    assert [b["step"] for b in batches] == list(range(1, steps + 1))
    final = [r for r in read_metrics(run_dir) if "rollout/reward_mean" in r][-1]
    group = data["trainer"]["group_size"]
    observed = sum(len(b["tasks"]) + len(b["dropped"]) for b in batches) * group
    seen = final[f"curriculum/{LEVELS_ID}/episodes_seen"] + final[f"curriculum/{VOWELS_ID}/episodes_seen"]
    assert seen == observed  # what the killed run had seen was restored, not started over


def test_a_resumed_mixture_run_replays_the_episodes_of_an_uninterrupted_one(tiny_model_dir, tmp_path):
    steps, kept = 6, 3
    data = _mixture(tmp_path, tiny_model_dir, trainer={"steps": steps, "group_order": "handout"},
                    eval={"episodes": 0}, checkpoint={"every": kept, "keep": 3})
    config, _ = _train(data)
    uninterrupted = _batches(config.run_dir)
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(config.run_dir, resumed_dir)
    (resumed_dir / "checkpoints" / "latest").write_text(f"step-{kept:06d}\n")
    resume(resumed_dir, console=Console(file=io.StringIO()))
    assert _batches(resumed_dir) == uninterrupted
    seeds = [seed for b in uninterrupted for seed in b["seeds"]]
    assert len({tuple(s) for s in seeds}) == len(seeds)


@pytest.mark.parametrize(
    ("override", "key"),
    [("env=[]", "env"), ("env.suite=games-v9", "env.suite"),
     ("env={suite: games-v0, weights: {tools/Calculator-v0: 2}}", "env.weights"),
     ("curriculum=ladder", "curriculum.name"), ("curriculum.band=[0.9,0.1]", "curriculum"),
     ("algorithm.dynamic_sampling_draws=0.5", "algorithm.dynamic_sampling_draws")],
)
def test_a_bad_mixture_exits_2_naming_the_key(tiny_model_dir, tmp_path, monkeypatch, capsys, override, key):
    config_file = tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(_mixture(tmp_path, tiny_model_dir)))
    code, err = _agentgym(monkeypatch, capsys, "train", str(config_file), override)
    assert code == 2 and key in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()
