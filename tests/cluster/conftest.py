"""Ray clusters on loopback, started and stopped by the tests: each node is its own raylet with its own worker
processes. The module's cluster has a head and a second node that alone offers ``chromium``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="the ray backend needs Ray: pip install 'agentgym[ray]'")
from ray.cluster_utils import Cluster

from agentgym.cluster.backend import worker_env

FAST_FAILURE_DETECTION = {"health_check_period_ms": 500, "health_check_failure_threshold": 4,
                          "health_check_initial_delay_ms": 1000}
"""A lost node is noticed in about two seconds (Ray's default takes fifteen)."""


@dataclass
class Nodes:
    """A running cluster and its nodes (``nodes[0]`` is the head)."""

    cluster: Cluster
    nodes: list[Any]

    def node_id(self, index: int) -> str:
        return self.nodes[index].node_id


@contextlib.contextmanager
def started_cluster(*nodes: dict[str, Any]) -> Iterator[Nodes]:
    """A cluster of ``nodes`` (each ``add_node`` arguments; the first is the head), this process connected to
    it; all of it stopped on leaving."""
    head, *others = nodes
    cluster = Cluster(initialize_head=True, head_node_args={**head, "_system_config": FAST_FAILURE_DETECTION})
    try:
        added = [cluster.head_node, *(cluster.add_node(**node) for node in others)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.WARNING, runtime_env={"env_vars": worker_env()})
        try:
            yield Nodes(cluster, added)
        finally:
            ray.shutdown()
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[Nodes]:
    """A head with 4 logical CPUs and a second node with 4 and ``chromium``."""
    with started_cluster({"num_cpus": 4}, {"num_cpus": 4, "resources": {"chromium": 1}}) as nodes:
        yield nodes
