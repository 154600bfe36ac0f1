"""The ray backend on a two-node cluster on loopback: the episodes of the local backend, env workers and engine
replicas killed mid-run, placement by label, and training and evaluation through it."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym import OraclePolicy, RandomPolicy, TaskSet
from agentgym.cluster.backend import RayBackend
from agentgym.cluster.config import RayConfig
from agentgym.errors import AgentGymError
from agentgym.evaluation.play import evaluate
from agentgym.inference.types import SamplingParams
from agentgym.policies.lm import LMPolicy
from agentgym.rollout import GroupId, RolloutConfig
from agentgym.trajectory import Trajectory
from tests.cluster.conftest import Nodes, ray
from tests.cluster.drills import LAKE, groups, once_delivered, roll, when_back
from tests.rollout.envs import SlowOracle


@pytest.mark.parametrize("workers", [pytest.param(1, marks=pytest.mark.ray), 3])
def test_the_ray_backend_plays_the_episodes_and_groups_of_the_local_one(two_nodes: Nodes, workers: int):
    tasks = TaskSet.generate(LAKE, 12, split="test", difficulties=["easy", "medium"])
    config = RolloutConfig(concurrency=12, group_size=3, seed=7)
    local_metrics, local = asyncio.run(roll(RandomPolicy(), tasks, config))
    backend = RayBackend(RayConfig(env_workers=workers))
    try:
        metrics, remote = asyncio.run(roll(RandomPolicy(), tasks, config, backend))
    finally:
        backend.close()
    assert groups(remote) == groups(local) and len(groups(remote)) == 12
    counts = ("started", "finished", "errored", "cancelled", "dropped", "groups_complete", "groups_failed")
    assert [getattr(metrics, c) for c in counts] == [getattr(local_metrics, c) for c in counts] == [36, 36, 0, 0, 0, 12, 0]
    assert len({t.info["worker"]["pid"] for t in remote}) == workers


@pytest.mark.ray
def test_a_killed_env_worker_loses_its_episodes_in_flight_to_refills_and_nothing_else(two_nodes: Nodes):
    backend = RayBackend(RayConfig(env_workers=2))
    tasks = TaskSet.generate(LAKE, 24, split="test")
    worker = backend.workers(LAKE).actors[0]
    before = ray.get(worker.where.remote())

    async def kill_a_worker(seen: list[Trajectory]) -> None:
        await once_delivered(seen, 8)
        ray.kill(worker, no_restart=False)

    try:
        metrics, seen = asyncio.run(roll(SlowOracle(0.05), tasks, RolloutConfig(concurrency=12, group_size=2),
                                          backend, meanwhile=kill_a_worker))
        after = when_back(worker.where.remote)
        _, later = asyncio.run(roll(RandomPolicy(), tasks[:8], RolloutConfig(concurrency=8), backend))
    finally:
        backend.close()
    kept = [t for t in seen if t.status != "error"]
    assert metrics.accounted and metrics.groups_complete == 24 and metrics.groups_failed == 0
    assert metrics.errored >= 1 and metrics.error_causes == {"worker:died": metrics.errored}
    assert metrics.retried == metrics.errored  # every lost episode refilled once
    assert len(kept) == 48 and all(t.success for t in kept)
    assert len({tuple(t.info["seed"]) for t in kept}) == 48  # none counted twice
    assert Counter(GroupId.of(t) for t in kept) == {GroupId(i): 2 for i in range(24)}
    assert after["pid"] != before["pid"]  # restarted by Ray
    assert after["pid"] in {t.info["worker"]["pid"] for t in later}  # and playing again


def _behaviour_logprobs_match(model: Any, trajectory: Trajectory) -> float:
    """The largest gap between the trajectory's behaviour logprobs and ``model``'s own, token by token."""
    ids = torch.tensor([trajectory.token_ids])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
    mine = logprobs.gather(1, ids[0, 1:, None])[:, 0]
    agent = torch.tensor(trajectory.loss_mask[1:], dtype=torch.bool)
    return float((mine[agent] - torch.tensor(trajectory.logprobs[1:])[agent]).abs().max())


RESTART = 300.0
"""Seconds a restarted replica may take to import torch, load the model and catch up (minutes under load)."""


@pytest.mark.ray
@pytest.mark.timeout(600)  # two replica processes start torch, and one of them again after the kill
def test_a_killed_engine_replica_is_replaced_its_requests_move_and_every_token_keeps_its_version(
        two_nodes: Nodes, tiny_model_dir):
    backend = RayBackend(RayConfig(env_workers=2, engine_replicas=2))
    engine = backend.engine("torch", tiny_model_dir, threads=1, max_batch_size=16)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.02 * torch.randn(parameter.shape, generator=generator))
    replica = engine.replicas[0]
    before = ray.get(replica.where.remote())

    async def kill_a_replica(seen: list[Trajectory]) -> None:
        await once_delivered(seen, 4)
        ray.kill(replica, no_restart=False)

    async def scenario() -> tuple[Any, list[Trajectory]]:
        assert await engine.update_weights(model.state_dict()) == 1
        policy = LMPolicy(engine, SamplingParams(max_tokens=8), max_context=1024)
        return await roll(policy, TaskSet.generate(LAKE, 12, split="test"), RolloutConfig(concurrency=16, group_size=2),
                           backend, env_kwargs={"parser": "pythonic", "max_turns": 4}, meanwhile=kill_a_replica)

    try:
        metrics, seen = asyncio.run(scenario())
        after, version = when_back(replica.where.remote, RESTART), when_back(replica.version.remote, RESTART)
    finally:
        asyncio.run(engine.close())
        backend.close()
    assert after["pid"] != before["pid"] and version == 1  # replaced, and it serves the published weights
    assert metrics.accounted and metrics.errored == 0 and metrics.groups_complete == 12
    for trajectory in seen:
        assert {v for v in trajectory.versions if v >= 0} == {1}
        assert _behaviour_logprobs_match(model, trajectory) < 1e-4


@pytest.mark.ray
@pytest.mark.browser
def test_web_episodes_run_only_on_the_node_that_offers_chromium(two_nodes: Nodes):
    backend = RayBackend(RayConfig(env_workers=3))
    try:
        tasks = TaskSet.generate("web/Shop-v0", 4, split="test")
        result = asyncio.run(evaluate("web/Shop-v0", OraclePolicy(), tasks, concurrency=4, backend=backend))
    finally:
        backend.close()
    assert result.summary.success_rate == 1.0 and result.summary.infra_errors == 0
    assert {t.info["worker"]["node"] for t in result.trajectories} == {two_nodes.node_id(1)}


@pytest.mark.ray
def test_an_environment_no_node_can_host_is_refused_naming_what_is_missing(two_nodes: Nodes):
    backend = RayBackend(RayConfig())
    try:
        with pytest.raises(AgentGymError, match=r"docker.*ray start --resources"):
            backend.runner("gui/DesktopWriteFile-v0", RandomPolicy(), None, close_timeout=10)
        with pytest.raises(AgentGymError, match=r"64 CPU \(of 8 CPU, 0 CPU taken\), more than the Ray cluster has"):
            RayBackend(RayConfig(env_workers=64, worker_cpus=1)).runner(LAKE, RandomPolicy(), None, close_timeout=10)
        with pytest.raises(AgentGymError, match=r"MiB of memory \(of .* MiB of memory"):
            RayBackend(RayConfig(engine_replicas=2, replica_memory_mb=10**8)).engine("torch", "unused")
    finally:
        backend.close()
