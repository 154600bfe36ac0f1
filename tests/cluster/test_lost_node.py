"""A node lost mid-run on a cluster of its own (the module's two-node cluster stays whole for the others)."""

from __future__ import annotations

import asyncio

import psutil
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

SETTLE = 0.5
"""Seconds for answers a worker sent just before it died to reach the stream."""


def test_a_lost_node_takes_its_workers_with_it_and_the_run_goes_on_with_what_is_left():
    with started_cluster({"num_cpus": 2}, {"num_cpus": 2}) as nodes:
        backend = RayBackend(RayConfig(env_workers=4))
        placed: list[dict] = []
        gone_at: list[int] = []

        async def lose_a_node(seen: list[Trajectory]) -> None:
            await once_delivered(seen, 8)
            placed.extend(await asyncio.gather(*(w.where.remote() for w in backend.workers(LAKE).actors)))
            doomed = [psutil.Process(p["pid"]) for p in placed if p["node"] == nodes.node_id(1)]
            await asyncio.to_thread(nodes.cluster.remove_node, nodes.nodes[1], False)
            await asyncio.to_thread(psutil.wait_procs, doomed)  # a worker plays on until it sees its raylet gone
            await asyncio.sleep(SETTLE)
            gone_at.append(len(seen))

        try:
            tasks = TaskSet.generate(LAKE, 96, split="test")  # a long tail after the loss, however long it takes
            metrics, seen = asyncio.run(roll(SlowOracle(0.1), tasks, RolloutConfig(concurrency=12, group_size=2),
                                              backend, meanwhile=lose_a_node))
        finally:
            backend.close()
    kept = [t for t in seen if t.status != "error"]
    after = [t for t in seen[gone_at[0]:] if t.status != "error"]
    assert {p["node"] for p in placed} == {nodes.node_id(0), nodes.node_id(1)}  # spread over both
    assert metrics.accounted and metrics.groups_complete == 96 and metrics.errored >= 1
    assert len(kept) == 192 and len({tuple(t.info["seed"]) for t in kept}) == 192
    assert len(after) >= 8 and {t.info["worker"]["node"] for t in after} == {nodes.node_id(0)}  # the rest is node 0's
