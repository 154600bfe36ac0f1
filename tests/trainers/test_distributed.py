"""The trainer on several ranks (Ray actors, gloo): a DDP or FSDP step on two ranks updates the weights as one
process does on the same batch, and checkpoints move between strategies and world sizes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym.trainers.batch import TrainBatch, collate, shares
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.learner import Learner
from agentgym.trajectory import Trajectory
from tests.trainers.envs import VOWELS_ID

ray = pytest.importorskip("ray", reason="the distributed trainer needs Ray: pip install 'agentgym[ray]'")
from agentgym.cluster.backend import connect
from agentgym.trainers.rank_group import RankGroup

pytestmark = pytest.mark.timeout(600)  # a Ray cluster and two ranks that each load torch: past 120 s under load

PROMPT = [5, 17, 42, 99, 7, 250]
ADAM_TOLERANCE = 2e-5
"""2% of the learning rate: Adam moves an entry by about lr * g / (|g| + eps), so a gradient entry near 0, whose
micro-batch parts cancel and are summed in another order across ranks, may move a few thousandths of lr apart
(measured: at most 6e-6). A wrong loss scale would not show here (Adam does not see it); the gradient norm does."""
METRICS = ("train/loss", "train/policy_loss", "train/grad_norm", "train/clip_fraction", "train/mismatch_k3_fresh")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    started = connect(None)
    yield
    if started:
        ray.shutdown()


def _config(model_dir: Path, **trainer: Any) -> TrainConfig:
    return TrainConfig.model_validate({
        "output_dir": "unused", "model": {"path": str(model_dir)}, "env": {"id": VOWELS_ID},
        "optim": {"lr": 1e-3, "grad_clip": 0.5}, "engine": {"threads": 1},
        "trainer": {"micro_batch_size": 2, **trainer},
    })


def _batch(model_dir: Path, config: TrainConfig) -> TrainBatch:
    """Five trajectories of different lengths (three micro-batches: one rank gets a padding pass), one of them
    without agent tokens, behaviour logprobs off the model's own so that clipping and correction act."""
    responses = [[10, 11, 12, 13], [20, 21], [30, 31, 32, 33, 34, 35], [40, 41, 42], [50, 51, 52, 53, 54]]
    trajectories = [Trajectory(env_id=VOWELS_ID, token_ids=(PROMPT * 2)[: 3 + i] + r,
                               loss_mask=[0] * (3 + i) + [int(i != 3)] * len(r),
                               logprobs=[0.0] * (3 + i + len(r)), versions=[-1] * (3 + i) + [0] * len(r))
                    for i, r in enumerate(responses)]
    batch = collate(trajectories, torch.tensor([1.0, -0.5, 0.3, 0.7, -1.2]), pad_id=0)
    learner = Learner(AutoModelForCausalLM.from_pretrained(model_dir), config)
    with torch.no_grad():
        logprobs, _ = learner.logprobs(learner.model, batch)
    shift = 0.4 * (torch.arange(logprobs.numel()).reshape(logprobs.shape) % 2)
    return replace(batch, behaviour_logprobs=(logprobs - shift) * batch.loss_mask)


def _step_on_two_ranks(single: TrainConfig, strategy: str, model_dir: Path, batch: TrainBatch
                       ) -> tuple[dict[str, float], dict[str, torch.Tensor], int]:
    """One step of ``batch`` by a trainer of two ranks under ``strategy``, configured as ``single`` otherwise: its
    metrics, its weights afterwards and its version."""
    config = single.model_copy(update={"trainer": single.trainer.model_copy(
        update={"world_size": 2, "strategy": strategy})})
    group = RankGroup(config, model_dir)
    try:
        return group.step(batch), group.weights(), group.version
    finally:
        group.close()


def test_shares_deal_every_micro_batch_once_and_pad_to_equal_passes(tiny_model_dir):
    batch = _batch(tiny_model_dir, _config(tiny_model_dir))
    two = shares(batch, 2, 2)
    assert [len(s.micro_batches) for s in two] == [2, 2] and [s.padding for s in two] == [0, 1]
    assert {(s.agent_tokens, s.sequences) for s in two} == {(batch.agent_tokens, batch.trained_sequences)}
    dealt = [m for s in two for m in s.micro_batches[: len(s.micro_batches) - s.padding]]
    assert sum(m.agent_tokens for m in dealt) == batch.agent_tokens == 17
    assert sum(m.rows for m in dealt) == 5
    four = shares(batch, 2, 4)  # more ranks than micro-batches: the last rank only pads
    assert [s.padding for s in four] == [0, 0, 0, 1]


@pytest.mark.parametrize(("strategy", "aggregation"), [  # the default run takes one; the ray step the rest
    ("ddp", "token-mean"),
    pytest.param("ddp", "sequence-mean", marks=pytest.mark.ray),
    pytest.param("fsdp", "token-mean", marks=pytest.mark.ray),
    pytest.param("fsdp", "sequence-mean", marks=pytest.mark.ray),
])
def test_a_step_on_two_ranks_updates_the_weights_as_one_process_does(tiny_model_dir, local_ray, strategy,
                                                                       aggregation):
    algorithm = {"loss": {"aggregation": aggregation, "correction": {"tis": 2.0}}}
    single = _config(tiny_model_dir)
    single = single.model_copy(update={"algorithm": single.algorithm.model_validate(algorithm)})
    batch = _batch(tiny_model_dir, single)
    learner = Learner(AutoModelForCausalLM.from_pretrained(tiny_model_dir), single)
    before = {k: v.clone() for k, v in learner.model.state_dict().items()}
    expected = learner.step(batch)

    metrics, weights, version = _step_on_two_ranks(single, strategy, tiny_model_dir, batch)

    assert version == learner.version == 1
    assert weights.keys() >= {k for k in before if k != "lm_head.weight"}
    moved = max((learner.model.state_dict()[k] - before[k]).abs().max().item() for k in weights)
    assert moved > 1e-4  # the step changed the weights, so equality below says something
    for key, value in weights.items():  # see ADAM_TOLERANCE
        torch.testing.assert_close(value, learner.model.state_dict()[key], rtol=0, atol=ADAM_TOLERANCE, msg=key)
    for key in METRICS:  # the gradient norm is taken after the ranks' reduction: it checks the loss's scale

        assert metrics[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-6), key
    assert metrics["train/agent_tokens"] == expected["train/agent_tokens"] == 17


@pytest.mark.parametrize(("strategy", "grad_norm"), [
    ("ddp", "exact"),
    pytest.param("fsdp", "logits", marks=pytest.mark.ray),
])
def test_vcpo_on_two_ranks_reduces_the_ess_and_baseline_over_both(tiny_model_dir, local_ray, strategy, grad_norm):
    """The ESS-scaled rate and the min-variance baseline come from every rank's trajectories (a group's members
    are dealt to both ranks): two ranks step as one process does, with the same ESS, rate and baseline."""
    vcpo = {"lr_scaling": "sqrt", "baseline": "min_variance", "grad_norm": grad_norm}
    single = _config(tiny_model_dir)
    single = single.model_copy(update={"algorithm": single.algorithm.model_validate(
        {"loss": {"correction": {"tis": 2.0}}, "vcpo": vcpo})})
    batch = _batch(tiny_model_dir, single)
    batch = replace(batch, rewards=torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0]), groups=torch.tensor([0, 0, 1, 1, 0]))
    learner = Learner(AutoModelForCausalLM.from_pretrained(tiny_model_dir), single)
    expected = learner.step(batch)
    assert expected["train/ess_ratio"] < 1 and expected["train/baseline_shift"] > 0  # both act on this batch

    metrics, weights, _ = _step_on_two_ranks(single, strategy, tiny_model_dir, batch)
    for key, value in weights.items():
        torch.testing.assert_close(value, learner.model.state_dict()[key], rtol=0, atol=ADAM_TOLERANCE, msg=key)
    for key in ("train/ess", "train/ess_ratio", "train/effective_lr", "train/baseline_mean", "train/baseline_shift",
                *METRICS):
        assert metrics[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-6), key


def _continued(learner: Learner | RankGroup, checkpoint: Path, batch: TrainBatch) -> dict[str, torch.Tensor]:
    """Restore ``learner`` from ``checkpoint`` (written at version 1), train on ``batch``, return its weights."""
    scheduler = torch.load(checkpoint / "scheduler.pt", weights_only=False)
    learner.restore(checkpoint, scheduler, 1)
    learner.step(batch)
    return learner.weights()


@pytest.mark.ray
def test_a_checkpoint_resumes_under_another_strategy_and_world_size(tiny_model_dir, local_ray, tmp_path):
    """Two steps in one process, against: a step sharded over two ranks, saved, and the second step in one
    process from that checkpoint; and a step in one process, saved, and the second sharded over two ranks."""
    config = _config(tiny_model_dir)
    batch = _batch(tiny_model_dir, config)
    # sampled by version 1 (a resumed learner has no snapshot of version 0, the uninterrupted one has)
    later = replace(batch, advantages=-batch.advantages, versions=torch.where(batch.versions >= 0, 1, -1))
    fsdp = config.model_copy(update={"trainer": config.trainer.model_copy(update={"world_size": 2,
                                                                                   "strategy": "fsdp"})})
    reference = Learner(AutoModelForCausalLM.from_pretrained(tiny_model_dir), config)
    reference.step(batch)
    reference.step(later)

    sharded, whole = tmp_path / "sharded", tmp_path / "whole"
    group = RankGroup(fsdp, tiny_model_dir)
    try:
        group.step(batch)
        group.save(sharded)
        torch.save(group.scheduler_state(), sharded / "scheduler.pt")
    finally:
        group.close()
    assert sorted(p.name for p in (sharded / "optimizer").iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    resumed = Learner(AutoModelForCausalLM.from_pretrained(sharded / "model"), config)
    from_sharded = _continued(resumed, sharded, later)

    first = Learner(AutoModelForCausalLM.from_pretrained(tiny_model_dir), config)
    first.step(batch)
    first.save(whole)
    torch.save(first.scheduler_state(), whole / "scheduler.pt")
    group = RankGroup(fsdp, whole / "model")
    try:
        from_whole = _continued(group, whole, later)
    finally:
        group.close()

    for key, value in reference.model.state_dict().items():
        if key in from_whole:
            torch.testing.assert_close(from_sharded[key], value, rtol=0, atol=ADAM_TOLERANCE, msg=key)
            torch.testing.assert_close(from_whole[key], value, rtol=0, atol=ADAM_TOLERANCE, msg=key)
