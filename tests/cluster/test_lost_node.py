"""A node lost mid-run on a cluster of its own (the module's two-node cluster stays whole for the others)."""

from __future__ import annotations

import asyncio

import pytest

from agentgym import TaskSet
from agentgym.cluster.backend import RayBackend
from agentgym.cluster.config import RayConfig
from agentgym.rollout import RolloutConfig
from agentgym.trajectory import Trajectory
from tests.cluster.conftest import started_cluster
from tests.cluster.drills import LAKE, once_delivered, roll
from tests.rollout.envs import SlowOracle

pytestmark = pytest.mark.ray


def test_a_lost_node_takes_its_workers_with_it_and_the_run_goes_on_with_what_is_left():
    with started_cluster({"num_cpus": 2}, {"num_cpus": 2}) as nodes:
        backend = RayBackend(RayConfig(env_workers=4))

        async def lose_a_node(seen: list[Trajectory]) -> None:
            await once_delivered(seen, 8)
            await asyncio.to_thread(nodes.cluster.remove_node, nodes.nodes[1], False)

        try:
            tasks = TaskSet.generate(LAKE, 24, split="test")
            metrics, seen = asyncio.run(roll(SlowOracle(0.05), tasks, RolloutConfig(concurrency=12, group_size=2),
                                              backend, meanwhile=lose_a_node))
        finally:
            backend.close()
    kept = [t for t in seen if t.status != "error"]
    assert {t.info["worker"]["node"] for t in seen[:8]} == {nodes.node_id(0), nodes.node_id(1)}  # spread over both
    assert metrics.accounted and metrics.groups_complete == 24 and metrics.errored >= 1
    assert len(kept) == 48 and len({tuple(t.info["seed"]) for t in kept}) == 48
    assert {t.info["worker"]["node"] for t in kept[-8:]} == {nodes.node_id(0)}  # what is left does the rest

