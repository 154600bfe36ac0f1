"""Run folders the viewer is tested on, each made once per session the way a user makes them: evaluations of a web
and a GUI environment by the oracle (screens), of the GUI one by the random policy (for comparing two runs), of the
web one by the tiny model on the torch engine (tokens and their logprobs), and a short training run (rollouts,
groups, held-out evaluations)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from agentgym.trainers import TrainConfig, train
from tests.trainers.envs import VOWELS_ID


def _eval(out: Path, *args: str) -> Path:
    done = subprocess.run([sys.executable, "-m", "agentgym", "eval", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def web_run(tmp_path_factory) -> Path:
    """The oracle on three shop tasks, with a screenshot in every observation."""
    return _eval(tmp_path_factory.mktemp("view") / "web", "web/Shop-v0", "--policy", "oracle", "--episodes", "3",
                 "--env-arg", "screenshot=true")


@pytest.fixture(scope="session")
def gui_run(tmp_path_factory) -> Path:
    """The oracle on four GUI tasks (screenshots only)."""
    return _eval(tmp_path_factory.mktemp("view") / "gui", "gui/ClickButton-v0", "--policy", "oracle",
                 "--episodes", "4")


@pytest.fixture(scope="session")
def gui_random_run(tmp_path_factory) -> Path:
    """The random policy on the same four GUI tasks: what the oracle solved and it did not."""
    return _eval(tmp_path_factory.mktemp("view") / "gui-random", "gui/ClickButton-v0", "--policy", "random",
                 "--episodes", "4")


@pytest.fixture(scope="session")
def model_run(tmp_path_factory, tiny_model_dir) -> Path:
    """The tiny (untrained) model on two shop tasks on the torch engine: token ids, logprobs and parse errors."""
    return _eval(tmp_path_factory.mktemp("view") / "model", "web/Shop-v0", "--engine", "torch", "--model",
                 str(tiny_model_dir), "--episodes", "2", "--max-tokens", "24")


@pytest.fixture(scope="session")
def train_run(tmp_path_factory, tiny_model_dir) -> Path:
    """Four steps of the trainer on Vowels, evaluated before and after: rollouts.jsonl and eval/step-N/."""
    run_dir = tmp_path_factory.mktemp("view") / "train"
    config = TrainConfig.model_validate({
        "output_dir": str(run_dir), "model": {"path": str(tiny_model_dir)}, "env": {"id": VOWELS_ID},
        "sampling": {"max_tokens": 12}, "optim": {"lr": 3e-3},
        "trainer": {"steps": 4, "groups_per_step": 4, "group_size": 4, "concurrency": 16, "async_ratio": 1},
        "eval": {"episodes": 8}, "checkpoint": {"every": 0},
    })
    train(config, console=Console(file=io.StringIO()))
    return run_dir
