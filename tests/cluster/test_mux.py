"""RollMux on a loopback Ray cluster: a node that alone offers ``rollout_pool``, one that alone offers
``train_pool`` and one that alone offers a second rollout pool, ``rollout_b``; the scheduler started by
``agentgym mux start``, and real training jobs submitted to it."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from safetensors.torch import load_file

from agentgym.trainers import TrainConfig, train
from agentgym.trainers.checkpoint import latest_checkpoint
from agentgym.trainers.mux.scheduler import NAME, NAMESPACE
from agentgym.trainers.mux.submit import JOB_PREFIX
from tests.cluster.conftest import started_cluster
from tests.trainers.test_train import _config

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

ROOT = Path(__file__).parents[2]
STEPS = 3
LEASE = 4.0
MUX = {"rollout_seconds": 1.0, "train_seconds": 1.0, "memory_gb": 0.5, "early_release": None}


@pytest.fixture(scope="module")
def pools():
    """The head offers the rollout pool, the second node the training pool, the third a second rollout pool."""
    with started_cluster({"num_cpus": 2, "resources": {"rollout_pool": 1}},
                         {"num_cpus": 2, "resources": {"train_pool": 1}},
                         {"num_cpus": 1, "resources": {"rollout_b": 1}}) as nodes:
        yield nodes


@pytest.fixture
def scheduler(pools, request):
    """``agentgym mux start`` on the cluster, with the group spec given as the fixture's parameter (default
    ``rollout_pool:train_pool``); stopped (with any job actor left) afterwards."""
    spec = getattr(request, "param", "rollout_pool:train_pool")
    done = _agentgym("mux", "start", "--ray-address", pools.cluster.address, "--lease", str(LEASE), "--pool", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"1 group spec(s): {spec}" in done.stdout
    yield ray.get_actor(NAME, namespace=NAMESPACE)
    for name in ("a", "b", "c"):
        try:
            ray.kill(ray.get_actor(JOB_PREFIX + name, namespace=NAMESPACE))
        except ValueError:
            pass
    _agentgym("mux", "stop", "--ray-address", pools.cluster.address)


def _agentgym(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "agentgym", *args], check=False, capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


def _job(root: Path, name: str, model: Path, **mux: Any) -> dict[str, Any]:
    """A synchronous Vowels run, its groups in hand-out order (so its batches do not depend on timing)."""
    return _config(root / name, model, trainer={"steps": STEPS, "async_ratio": 0, "group_order": "handout"},
                   eval={"episodes": 8}, mux={"job": name, **MUX, **mux})


def _submit(address: str, job: dict[str, Any], folder: Path) -> subprocess.CompletedProcess:
    path = folder / f"{job['mux']['job']}.yaml"
    path.write_text(yaml.safe_dump(job))
    return _agentgym("mux", "submit", str(path), "--ray-address", address)


def _status(scheduler) -> dict[str, Any]:
    """The scheduler's status, waiting out its restart."""
    for _ in range(100):
        try:
            return ray.get(scheduler.status.remote())
        except (ray.exceptions.ActorUnavailableError, ray.exceptions.RayActorError):
            time.sleep(0.2)
    raise AssertionError("the scheduler never came back")


def _until_left(scheduler, names: set[str], timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = _status(scheduler)
        if names <= set(status["left"]) and not names & {j["job"] for j in status["jobs"]}:
            return status
        time.sleep(0.5)
    raise AssertionError(f"jobs still running after {timeout} s: {status['jobs']}; left: {status['left']}")


def _batches(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "batches.jsonl").read_text().splitlines()]


def _weights(run_dir: Path) -> dict[str, Any]:
    checkpoint = latest_checkpoint(run_dir)
    assert checkpoint is not None
    return load_file(checkpoint / "model" / "model.safetensors")


@pytest.mark.timeout(600)
def test_two_jobs_take_turns_on_the_pools_and_train_as_they_do_alone(pools, scheduler, tiny_model_dir, tmp_path):
    address = pools.cluster.address
    jobs = [_job(tmp_path / "mux", name, tiny_model_dir) for name in ("a", "b")]
    for job in jobs:
        done = _submit(address, job, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"job {job['mux']['job']} admitted to group 0 (rollout_pool, train_pool)" in done.stdout
    heavy = _job(tmp_path / "mux", "c", tiny_model_dir, memory_gb=1e6)
    refused = _submit(address, heavy, tmp_path)
    assert refused.returncode == 3 and "refused job c: host memory" in refused.stderr

    status = _until_left(scheduler, {"a", "b"})
    assert status["left"]["a"] == status["left"]["b"] == "finished"
    assert status["left"]["c"].startswith("refused: host memory")
    shown = _agentgym("mux", "status", "--ray-address", address)
    assert shown.returncode == 0 and "a: finished" in shown.stdout and "c: refused: host memory" in shown.stdout

    phases = status["phases"]
    for pool in ("rollout", "train"):
        turns = sorted((p for p in phases if p["pool"] == pool), key=lambda p: p["start"])
        assert all(p["end"] is not None for p in turns)
        assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(turns)), f"{pool} overlapped"
        for before, after in itertools.pairwise(turns):
            if after["job"] == before["job"]:  # the permit passed back to the same job: the other was not waiting
                other = next((p for p in turns if p["job"] != before["job"] and p["start"] >= after["start"]), None)
                assert other is None or other["asked"] >= before["end"] - 1e-3, (pool, before, after, other)
    for name in ("a", "b"):
        trains = [p for p in phases if p["job"] == name and p["pool"] == "train"]
        assert len(trains) == STEPS  # one training turn per step; the rollout pool also served its evaluations

    for job in jobs:
        alone = {**job, "output_dir": str(tmp_path / "solo" / job["mux"]["job"]), "mux": {}}
        config = TrainConfig.model_validate(alone)
        train(config, console=Console(file=io.StringIO()))
        muxed, solo = Path(job["output_dir"]), config.run_dir
        assert [{k: b[k] for k in ("step", "tasks", "seeds")} for b in _batches(muxed)] == \
               [{k: b[k] for k in ("step", "tasks", "seeds")} for b in _batches(solo)]
        ours, theirs = _weights(muxed), _weights(solo)
        start = load_file(tiny_model_dir / "model.safetensors")
        assert ours.keys() == theirs.keys() == start.keys()
        # Adam turns float noise in near-zero gradients into steps of up to lr: compare against the run's own move
        apart = sum(((ours[k] - theirs[k]) ** 2).sum() for k in ours) ** 0.5
        moved = sum(((theirs[k] - start[k]) ** 2).sum() for k in ours) ** 0.5
        assert apart < 1e-3 * moved
        (rank,) = json.loads((muxed / "ranks.json").read_text())
        assert rank["node_id"] == pools.node_id(1)  # the learner on the training pool's node
        records = [json.loads(line) for line in (muxed / "metrics.jsonl").read_text().splitlines()]
        assert all(r["mux/switch_seconds"] >= 0 for r in records if "train/loss" in r)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("scheduler", ["rollout_pool,rollout_b:train_pool"], indirect=True)
def test_a_group_scales_its_rollout_onto_a_second_pool_and_shares_one_training_pool(pools, scheduler,
                                                                                    tiny_model_dir, tmp_path):
    address = pools.cluster.address
    heavy = {"rollout_seconds": 3.0, "train_seconds": 1.0, "slo": 1.2}  # on one rollout pool: 1.5x each
    where = {"a": ("rollout_pool", 0), "b": ("rollout_b", 2)}
    for name, (resource, node) in where.items():
        done = _submit(address, _job(tmp_path / "mux", name, tiny_model_dir, **heavy), tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        # the job's driver (its engine and env workers beside it) on its own rollout pool
        assert f"job {name} admitted to group 0 ({resource}, train_pool), its driver on node {pools.node_id(node)}" \
            in done.stdout
    status = _until_left(scheduler, {"a", "b"})
    assert status["left"] == {"a": "finished", "b": "finished"}
    trains = sorted((p for p in status["phases"] if p["pool"] == "train"), key=lambda p: p["start"])
    assert len(trains) == 2 * STEPS and all(a["end"] <= b["start"] for a, b in itertools.pairwise(trains))
    for name in where:
        (rank,) = json.loads((tmp_path / "mux" / name / "ranks.json").read_text())
        assert rank["node_id"] == pools.node_id(1)  # both learners take turns on the one training pool


@pytest.mark.timeout(600)
def test_a_restarted_scheduler_loses_no_step_and_a_killed_job_frees_its_pools(pools, scheduler, tiny_model_dir,
                                                                                 tmp_path):
    address = pools.cluster.address
    jobs = [_job(tmp_path, name, tiny_model_dir, early_release=0.5) for name in ("a", "b")]
    jobs[1]["trainer"]["steps"] = 6  # b outlives the drills
    for job in jobs:
        assert _submit(address, job, tmp_path).returncode == 0
    deadline = time.monotonic() + 200
    while not any(j["step"] >= 1 for j in _status(scheduler)["jobs"]):
        assert time.monotonic() < deadline, "no job made a step"
        time.sleep(0.3)
    killed = _status(scheduler)["started"]
    ray.kill(scheduler, no_restart=False)  # Ray restarts it empty; the jobs register again
    while True:  # the kill is asynchronous: the old scheduler may still answer for a moment
        status = _status(scheduler)
        if status["started"] != killed and any(j["job"] == "a" and j["state"] in ("rollout", "train")
                                               for j in status["jobs"]):
            break
        assert time.monotonic() < deadline, "job a never took a pool of the restarted scheduler"
        time.sleep(0.1)
    ray.kill(ray.get_actor(JOB_PREFIX + "a", namespace=NAMESPACE))  # mid-phase, holding a permit

    status = _until_left(scheduler, {"a", "b"})
    assert status["left"]["b"] == "finished"
    assert status["left"]["a"].startswith("crashed: not heard from")
    assert [b["step"] for b in _batches(Path(jobs[1]["output_dir"]))] == list(range(1, 7))
    b_phases = [p for p in status["phases"] if p["job"] == "b"]
    assert b_phases and all(p["end"] is not None for p in b_phases)
