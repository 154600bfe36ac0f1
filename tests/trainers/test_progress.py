"""What a short run shows and logs off a terminal (a log file, CI): a line per step, and the rollout's
throughput measured while it trains."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from agentgym.metrics_log import read_metrics
from agentgym.trainers import TrainConfig, train
from tests.trainers.envs import VOWELS_ID

STEPS = 4
LINE = re.compile(r"train step (\d+)/4 \d+:\d\d:\d\d(  .+)?")


@pytest.fixture(scope="module")
def logged_run(tiny_model_dir, tmp_path_factory):
    """A short Vowels run whose console is a file, and what it printed there."""
    config = TrainConfig.model_validate({
        "output_dir": str(tmp_path_factory.mktemp("progress") / "run"),
        "model": {"path": str(tiny_model_dir)},
        "env": {"id": VOWELS_ID},
        "sampling": {"max_tokens": 12},
        "trainer": {"steps": STEPS, "groups_per_step": 4, "group_size": 4, "concurrency": 16, "async_ratio": 1},
        "eval": {"episodes": 8},
        "checkpoint": {"every": 0},
    })
    printed = io.StringIO()
    train(config, console=Console(file=printed))
    return config, printed.getvalue().splitlines()


def test_off_a_terminal_each_step_prints_a_line(logged_run):
    _, lines = logged_run
    assert lines and all(LINE.fullmatch(line) for line in lines), lines
    assert "waiting for rollouts" in lines[0]
    first = {}
    for line in lines:
        first.setdefault(int(LINE.fullmatch(line)[1]), line)
    assert sorted(first) == list(range(STEPS + 1))
    assert any("held-out" in line for line in lines[: lines.index(first[1])])  # the evaluation before step 1
    for step in range(1, STEPS + 1):
        fields = dict(re.findall(r"([a-z/-]+) ([0-9.+%-]+)", first[step]))
        assert {"reward", "success", "held-out", "traj/s", "tok/s", "loss"} <= fields.keys(), first[step]
        assert float(fields["tok/s"]) > 0


def test_tokens_per_second_is_measured_while_training(logged_run):
    config, _ = logged_run
    records = read_metrics(config.run_dir)
    rollout_began = records[0]["time"]  # the rollout starts once the evaluation before step 1 is logged
    steps = [r for r in records if "rollout/tokens_per_second" in r]
    assert [r["step"] for r in steps] == list(range(1, STEPS + 1))
    rollout_seconds = []
    for record in steps:
        assert record["rollout/generated_tokens"] > 0 and record["rollout/tokens_per_second"] > 0
        rollout_seconds.append(record["rollout/generated_tokens"] / record["rollout/tokens_per_second"])
        assert 0 < rollout_seconds[-1] <= record["time"] - rollout_began
    assert rollout_seconds == sorted(rollout_seconds)
