"""The bundled ``swe`` config trains end to end with the tiny model: episodes in docker sandboxes, each graded in a
clean copy of its repository, two steps of async GRPO, held-out evaluation before and after."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from agentgym.config import load_config
from agentgym.metrics_log import read_metrics
from agentgym.trainers import train
from agentgym.trainers.bundled_configs import configs_folder
from agentgym.trainers.config import TrainConfig

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]


def test_the_swe_config_trains_on_graded_episodes(tiny_model_dir, tmp_path):
    config = load_config(TrainConfig, configs_folder() / "swe.yaml", [
        f"output_dir={tmp_path / 'run'}", f"model.path={tiny_model_dir}", "trainer.steps=2",
        "trainer.groups_per_step=2", "trainer.group_size=2", "trainer.concurrency=4", "eval.episodes=2",
        "env.kwargs.max_turns=2", "sampling.max_tokens=32", "checkpoint.every=0"])
    result = train(config, console=Console(file=io.StringIO()))
    assert result.steps == 2
    records = [r for r in read_metrics(config.run_dir) if "rollout/reward_mean" in r]
    assert [r["step"] for r in records] == [1, 2]
    episodes = [json.loads(line) for line in (config.run_dir / "rollouts.jsonl").read_text().splitlines()]
    assert len(episodes) >= 8
    for episode in episodes:
        trajectory = episode["trajectory"]
        assert trajectory["status"] in ("ok", "truncated") and trajectory["env_id"] == "swe/Repos-v0"
        assert trajectory["task"]["difficulty"] == "easy"
        report = trajectory["info"]["report"]  # every episode was graded, by submit or at the turn limit
        assert set(report) >= {"diff", "FAIL_TO_PASS", "PASS_TO_PASS", "resolved"}
        assert trajectory["reward"] == report["reward"]
    assert [r["step"] for r in read_metrics(config.run_dir) if "eval/success_rate" in r] == [0, 2]
