"""LATR tree rollouts on the ray backend: an env worker grows a group's tree through the engine client, whose
replica (holding the published weights) grows each turn's tree, and ``sampling: latr`` trains on Ray."""

from __future__ import annotations

import asyncio
import pickle
from collections import Counter
from collections.abc import Iterator

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym.cluster.backend import RayBackend
from agentgym.cluster.config import RayConfig
from agentgym.episode import Timeouts
from agentgym.inference.types import SamplingParams, TreeEngine
from agentgym.metrics_log import read_metrics
from agentgym.policies.lm import LMPolicy
from agentgym.rollout.config import TreeRollout
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory
from tests.cluster.conftest import Nodes, started_cluster
from tests.cluster.drills import LAKE
from tests.cluster.test_ray_rollout import _behaviour_logprobs_match
from tests.trainers.test_train import _batches, _config, _train
from tests.trainers.test_train_latr import EAGER

pytestmark = pytest.mark.ray

APART = TreeRollout(tau_abs=1e-4, tau_rel=1.0, turn_window=2, forced_turn=4, prune_threshold=None,
                    prune_same_observation=False)
"""Settings under which the untrained tiny model branches at once and no branch is pruned (each differs from its
parent at its fork), so a tree fills its width."""


@pytest.fixture(scope="module")
def one_node() -> Iterator[Nodes]:
    with started_cluster({"num_cpus": 4}) as nodes:
        yield nodes


def test_a_tree_group_grows_on_an_engine_replica_with_the_published_weights(one_node: Nodes, tiny_model_dir):
    backend = RayBackend(RayConfig(env_workers=1))
    engine = backend.engine("torch", tiny_model_dir, threads=1)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.02 * torch.randn(parameter.shape, generator=generator))
    assert isinstance(pickle.loads(pickle.dumps(engine)), TreeEngine)  # the client an env worker's policy holds
    policy = LMPolicy(engine, SamplingParams(temperature=1.0, max_tokens=10), max_context=1024)
    runner = backend.runner(LAKE, policy, {"parser": "pythonic", "max_turns": 6}, close_timeout=10)
    task = Task(env_id=LAKE, seed=7, difficulty="easy")

    async def scenario() -> list[Trajectory]:
        assert await engine.update_weights(model.state_dict()) == 1
        return await runner.play_tree(task, seed=(0, 7), width=3, settings=APART, timeouts=Timeouts())

    try:
        trajectories = asyncio.run(scenario())
    finally:
        asyncio.run(runner.close())
        asyncio.run(engine.close())
        backend.close()
    assert len(trajectories) == 3
    assert trajectories[0].info["branch"] == 0 and trajectories[0].info["tree"]["made"] >= 2
    assert len({t.info["worker"]["pid"] for t in trajectories}) == 1  # one worker played the whole tree
    for trajectory in trajectories:
        assert trajectory.status in ("ok", "truncated"), trajectory.error
        assert len(trajectory.tree_chosen) == len(trajectory.token_ids) == len(trajectory.logprobs)
        assert any(trajectory.tree_chosen)  # the replica's tree chose this episode's first tokens
        assert {v for v in trajectory.versions if v >= 0} == {1}  # grown under the published weights
        assert _behaviour_logprobs_match(model, trajectory) < 1e-4


@pytest.mark.timeout(300)  # a replica and two env workers start torch, and the learner loads beside them
def test_a_latr_run_on_ray_trains_on_full_groups(one_node: Nodes, tiny_model_dir, tmp_path):
    rollout = {"backend": "ray", "ray": {"env_workers": 2, "replica_cpus": 0.5}, "sampling": "latr", "latr": EAGER}
    config, result = _train(_config(tmp_path / "run", tiny_model_dir, trainer={"steps": 2}, eval={"episodes": 0},
                                    rollout=rollout))
    assert result.steps == 2
    records = [r for r in read_metrics(config.run_dir) if "train/loss" in r]
    assert [r["step"] for r in records] == [1, 2]
    assert all(r["rollout/tree_groups"] > 0 and r["rollout/tree_branches"] > 0 for r in records)
    batches = _batches(config.run_dir)
    assert len(batches) == 2
    for batch in batches:
        assert Counter(seed[1] for seed in batch["seeds"]) == {task: config.trainer.group_size
                                                              for task in batch["tasks"]}
