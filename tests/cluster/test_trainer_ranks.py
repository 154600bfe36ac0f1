"""The trainer's ranks across two nodes (a cluster of its own on loopback): the step one process takes, over a
process group that spans nodes; and a lost node fails the next step, naming its rank, in bounded time."""

from __future__ import annotations

import time

import psutil
import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym.trainers.learner import Learner
from agentgym.trainers.rank_group import RankGroup, TrainerRankError
from tests.cluster.conftest import started_cluster
from tests.trainers.test_distributed import ADAM_TOLERANCE, _batch, _config

pytestmark = pytest.mark.ray


def test_ranks_on_two_nodes_train_as_one_process_and_a_lost_node_fails_the_step_naming_its_rank(tiny_model_dir):
    config = _config(tiny_model_dir, world_size=2, strategy="ddp", collective_timeout=30)
    batch = _batch(tiny_model_dir, _config(tiny_model_dir))
    single = Learner(AutoModelForCausalLM.from_pretrained(tiny_model_dir), _config(tiny_model_dir))
    single.step(batch)
    with started_cluster({"num_cpus": 1}, {"num_cpus": 1}) as nodes:  # one rank fits a node
        group = RankGroup(config, tiny_model_dir)
        try:
            assert {r["node_id"] for r in group.where} == {nodes.node_id(0), nodes.node_id(1)}
            group.step(batch)
            for key, value in group.weights().items():
                torch.testing.assert_close(value, single.model.state_dict()[key], rtol=0, atol=ADAM_TOLERANCE)

            lost = next(r for r in group.where if r["node_id"] == nodes.node_id(1))
            nodes.cluster.remove_node(nodes.nodes[1], allow_graceful=False)
            _, alive = psutil.wait_procs([psutil.Process(lost["pid"])], timeout=60)  # it plays on until it sees
            assert not alive  # its raylet gone
            started = time.monotonic()
            with pytest.raises(TrainerRankError, match=f"rank {lost['rank']} died") as failure:
                group.step(batch)
            assert time.monotonic() - started < config.trainer.collective_timeout + 10
            assert "failed at version 1" in str(failure.value)
        finally:
            group.close()
