"""``agentgym train`` and ``agentgym eval`` with the ray backend, as a user runs them on a laptop: the command
starts a local Ray, puts the env workers and engine replicas there, and stops it at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from agentgym.evaluation.records import RunFolder
from agentgym.metrics_log import read_metrics
from tests.trainers.test_train import _config

ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.ray


def _agentgym(*args: str, timeout: float = 400, **env_vars: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_vars}
    env.pop("RAY_ADDRESS", None)  # a local Ray of the command's own
    return subprocess.run([sys.executable, "-m", "agentgym", *args], check=False, capture_output=True, text=True, env=env,
                          timeout=timeout)


def _scores(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(300)  # two whole evaluations, one starting a Ray
def test_eval_on_ray_scores_a_suite_as_the_local_backend_does(tmp_path):
    common = ["eval", "--suite", "games-v0", "--policy", "random", "--json"]
    local = _scores(_agentgym(*common, "--out", str(tmp_path / "local")))
    with tempfile.TemporaryDirectory() as ray_tmp:  # short: Ray's socket paths live under it
        # a Ray that died without cleaning up left its address behind; ray.init() alone would try to join it
        (Path(ray_tmp) / "ray").mkdir()
        (Path(ray_tmp) / "ray" / "ray_current_cluster").write_text("127.0.0.1:9")
        remote = _scores(_agentgym(*common, "--backend", "ray", "--env-workers", "2", "--out", str(tmp_path / "ray"),
                                   RAY_TMPDIR=ray_tmp))
    for key in ("scored", "success_rate", "pass_at_k", "mean_reward", "mean_turns", "by_difficulty", "infra_errors"):
        assert remote[key] == local[key], key
    episodes = [{key: ([t.action for t in r.trajectory.turns], r.reward) for key, r in RunFolder(tmp_path / name).finished().items()}
                for name in ("local", "ray")]
    assert episodes[0] == episodes[1] and len(episodes[0]) == 120
    pids = {r.trajectory.info["worker"]["pid"] for r in RunFolder(tmp_path / "ray").finished().values()}
    assert len(pids) == 2 and os.getpid() not in pids


@pytest.mark.timeout(450)  # a Ray, two torch replicas and a learner start; the command's own limit is 400 s
def test_train_on_ray_runs_its_steps_with_replicas_that_hold_the_learners_weights(tiny_model_dir, tmp_path):
    run_dir, config_file = tmp_path / "run", tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(_config(run_dir, tiny_model_dir, trainer={"steps": 3}, eval={"episodes": 8})))
    done = _agentgym("train", str(config_file), "rollout.backend=ray", "rollout.ray.env_workers=2",
                     "rollout.ray.engine_replicas=2", "rollout.ray.replica_cpus=0.5")
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [r for r in read_metrics(run_dir) if "train/mismatch_k3_fresh" in r or "train/skipped" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert all(r["rollout/staleness_max"] <= 1 for r in steps)
    # behaviour logprobs from the replicas equal the learner's under the same weights, version after version
    assert max(r.get("train/mismatch_k3_fresh", 0.0) for r in steps) < 1e-6
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 3
    assert {r["step"] for r in read_metrics(run_dir) if "eval/success_rate" in r} == {0, 3}


@pytest.mark.parametrize("arguments", [["--backend", "ray", "--engine", "openai", "--model", "m",
                                        "--base-url", "http://127.0.0.1:9/v1"]])
def test_eval_on_ray_refuses_an_engine_whose_connection_cannot_travel(tmp_path, arguments):
    done = _agentgym("eval", "games/FrozenLake-v0", "--episodes", "2", *arguments, "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and "openai engine" in done.stderr
