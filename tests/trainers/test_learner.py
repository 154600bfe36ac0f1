"""Learner: one step of the corrected PPO loss on the tiny model, its gradient, pi_old and snapshots."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym.algorithms import policy_loss
from agentgym.trainers.batch import TrainBatch, collate
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.learner import Learner, by_trajectory
from agentgym.trajectory import Trajectory
from tests.trainers.envs import VOWELS_ID

PROMPT = [5, 17, 42, 99, 7, 250]


def _learner(model_dir: Any, **sections: dict[str, Any]) -> Learner:
    config = TrainConfig.model_validate(
        {"output_dir": "unused", "model": {"path": str(model_dir)}, "env": {"id": VOWELS_ID}, **sections}
    )
    return Learner(AutoModelForCausalLM.from_pretrained(model_dir), config)


def _trajectory(
    response: list[int], version: int = 0, prompt: list[int] = PROMPT, agent: bool = True
) -> Trajectory:
    return Trajectory(
        env_id=VOWELS_ID,
        token_ids=prompt + response,
        loss_mask=[0] * len(prompt) + [int(agent)] * len(response),
        logprobs=[0.0] * (len(prompt) + len(response)),
        versions=[-1] * len(prompt) + [version] * len(response),
    )


def _batch(
    learner: Learner, trajectories: list[Trajectory], advantages: list[float], shift: float = 0.0
) -> TrainBatch:
    """The batch with the model's own logprobs (minus ``shift`` on every other token) as behaviour logprobs."""
    batch = collate(trajectories, torch.tensor(advantages), pad_id=0)
    with torch.no_grad():
        logprobs, _ = learner.logprobs(learner.model, batch)
    offsets = shift * (torch.arange(logprobs.numel()).reshape(logprobs.shape) % 2)
    return replace(batch, behaviour_logprobs=(logprobs - offsets) * batch.loss_mask)


def _agent_logprob_sums(learner: Learner, batch: TrainBatch) -> torch.Tensor:
    with torch.no_grad():
        logprobs, _ = learner.logprobs(learner.model, batch)
    return (logprobs * batch.loss_mask).sum(-1)


@pytest.mark.parametrize("padding", ["right", "left", "packed"])
def test_logprobs_at_agent_tokens_match_a_full_forward(tiny_model_dir, padding):
    """Only agent positions go through the output layer, right-padded rows drop the attention mask, and packed
    ones go in as one sequence; each gives the plain masked forward pass's logprobs (sampling temperature) and
    entropies (the model's)."""
    learner = _learner(tiny_model_dir, sampling={"temperature": 0.7},
                       trainer={"sequence_packing": padding == "packed"})
    trajectories = [_trajectory([300, 301, 302]), _trajectory([400, 401], prompt=PROMPT[:3]),
                    _trajectory([500, 501], agent=False)]
    batch = collate(trajectories, torch.zeros(3), pad_id=0)
    if padding == "left":
        pads = (batch.attention_mask == 0).sum(-1).tolist()

        def left(t: torch.Tensor) -> torch.Tensor:
            return torch.stack([row.roll(k, -1) for row, k in zip(t, pads)])

        batch = replace(batch, input_ids=left(batch.input_ids), attention_mask=left(batch.attention_mask),
                        loss_mask=left(batch.loss_mask))
    with torch.no_grad():
        logprobs, entropy = learner.logprobs(learner.model, batch, entropy=True)
        logits = learner.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]
    sampled, model = torch.log_softmax(logits / 0.7, -1), torch.log_softmax(logits, -1)
    agent = batch.loss_mask.bool()
    expected = sampled.gather(-1, batch.input_ids[:, 1:, None])[..., 0]
    torch.testing.assert_close(logprobs[agent], expected[agent], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy[agent], -(model.exp() * model).sum(-1)[agent], rtol=1e-5, atol=1e-5)
    assert agent.sum() == 5 and not logprobs[~agent].any()


def test_a_step_moves_the_policy_towards_the_positive_advantage(tiny_model_dir):
    learner = _learner(tiny_model_dir, optim={"lr": 1e-3}, trainer={"micro_batch_size": 1})
    good, bad = _trajectory([300, 301, 302, 303]), _trajectory([400, 401, 402, 403, 404])
    batch = _batch(learner, [good, bad], [1.0, -1.0])
    before = batch.behaviour_logprobs
    loss_config = learner.config.algorithm.loss
    loss_before, _ = policy_loss(before, before, before, batch.advantages, batch.loss_mask, loss_config)
    sums_before = _agent_logprob_sums(learner, batch)

    metrics = learner.step(batch)

    assert learner.version == 1
    assert metrics["train/loss"] == pytest.approx(loss_before.item(), abs=1e-5)
    moved = _agent_logprob_sums(learner, batch) - sums_before
    positive = batch.advantages > 0
    assert moved[positive].item() > 0 and moved[~positive].item() < 0
    with torch.no_grad():
        after, _ = learner.logprobs(learner.model, batch)
    loss_after, _ = policy_loss(after, before, before, batch.advantages, batch.loss_mask, loss_config)
    assert loss_after.item() < loss_before.item()


@pytest.mark.parametrize("aggregation", ["token-mean", "sequence-mean"])
def test_gradient_accumulation_is_exact(tiny_model_dir, aggregation):
    trajectories = [
        _trajectory([10, 11, 12, 13]),
        _trajectory([20, 21], prompt=PROMPT[:2]),
        _trajectory([30, 31, 32, 33, 34, 35], prompt=PROMPT + [8, 9]),
        _trajectory([40, 41, 42], agent=False),  # no agent tokens: no loss, and no weight in the mean
    ]
    results = []
    # 20 tokens: passes of 1, 2 and 1 rows, padded or packed
    for micro_batch_size, max_tokens, packed in ((4, None, False), (1, None, False), (4, 20, False), (4, 20, True),
                                                 (4, None, True)):
        learner = _learner(
            tiny_model_dir,
            optim={"grad_clip": None},
            trainer={"micro_batch_size": micro_batch_size, "max_tokens_per_micro_batch": max_tokens,
                     "sequence_packing": packed},
            algorithm={"loss": {"aggregation": aggregation}},
        )
        batch = _batch(learner, trajectories, [1.0, -0.5, 0.3, 0.7], shift=0.3)
        metrics = learner.step(batch)  # the gradient stays in .grad after the optimizer step
        results.append((torch.cat([p.grad.flatten() for p in learner.model.parameters()]), metrics))
    (whole, at_once), *parts = results

    assert whole.abs().max() > 0.1
    keys = ("train/loss", "train/policy_loss", "train/grad_norm", "train/is_ratio_min", "train/is_ratio_max",
            "train/clip_fraction", "train/mismatch_k3")
    for accumulated, in_parts in parts:
        torch.testing.assert_close(accumulated, whole, rtol=1e-4, atol=1e-5)
        for key in keys:
            assert in_parts[key] == pytest.approx(at_once[key], rel=1e-4, abs=1e-6), key


def _stale_batch(learner: Learner, version: int = 0) -> TrainBatch:
    trajectories = [_trajectory([60, 61, 62, 63], version), _trajectory([70, 71, 72], version)]
    return _batch(learner, trajectories, [1.0, -1.0])


@pytest.mark.parametrize("micro_batch_size", [1, 2])
def test_exact_old_logprobs_come_from_the_version_that_sampled(tiny_model_dir, micro_batch_size):
    exact = _learner(
        tiny_model_dir,
        optim={"lr": 1e-2},
        algorithm={"old_logprobs": "exact"},
        trainer={"async_ratio": 2, "micro_batch_size": micro_batch_size},
    )
    stale = _stale_batch(exact)  # behaviour logprobs: the initial model's (version 0)
    exact.step(_stale_batch(exact))
    assert exact.version == 1

    agent = stale.loss_mask.bool()
    with torch.no_grad():
        proximal, _ = exact.logprobs(exact.model, stale)
    old, missing = exact._old_logprobs(stale, proximal, agent)
    torch.testing.assert_close(old[agent], stale.behaviour_logprobs[agent], rtol=0, atol=1e-5)
    assert not missing.any()
    assert (proximal[agent] - old[agent]).abs().max() > 1e-3  # the weights did move

    metrics = exact.step(stale)
    assert metrics["train/stale_token_fraction"] == 1.0
    assert metrics["train/staleness_mean"] == pytest.approx(1.0)
    assert metrics["train/staleness_k3"] > 1e-5
    assert metrics["train/old_logprobs_missing_fraction"] == 0.0
    assert metrics["train/mismatch_k3"] == pytest.approx(0.0, abs=1e-7)

    recompute = _learner(
        tiny_model_dir,
        optim={"lr": 1e-2},
        algorithm={"old_logprobs": "recompute"},
        trainer={"async_ratio": 2, "micro_batch_size": micro_batch_size},
    )
    stale = _stale_batch(recompute)
    recompute.step(_stale_batch(recompute))
    recomputed = recompute.step(stale)
    assert recomputed["train/staleness_k3"] == 0.0
    assert recomputed["train/old_logprobs_missing_fraction"] == 0.0
    # the same gap now shows up as a mismatch between the behaviour policy and pi_old
    assert recomputed["train/mismatch_k3"] == pytest.approx(metrics["train/staleness_k3"], rel=1e-3)


def test_snapshots_keep_the_live_versions_and_tokens_older_count_as_missing(tiny_model_dir):
    learner = _learner(tiny_model_dir, optim={"lr": 1e-2}, trainer={"async_ratio": 2, "micro_batch_size": 2})
    initial = {k: v.clone() for k, v in learner.model.state_dict().items()}
    for _ in range(3):
        learner.step(_stale_batch(learner, version=learner.version))
        kept = [v for v in range(-1, learner.version + 2) if v in learner.snapshots]
        assert kept == list(range(max(0, learner.version - 3), learner.version))
    snapshot = learner.snapshots.model(0).state_dict()
    assert all(torch.equal(snapshot[k], v) for k, v in initial.items())

    old, live = _trajectory([80, 81, 82, 83], version=0), _trajectory([90, 91], version=2)
    metrics = learner.step(_batch(learner, [old, live], [1.0, -1.0]))  # at version 3: keeps 1, 2, 3
    assert [v for v in range(5) if v in learner.snapshots] == [1, 2, 3]
    assert metrics["train/old_logprobs_missing_fraction"] == pytest.approx(4 / 6)
    with pytest.raises(KeyError, match="no snapshot of version 0"):
        learner.snapshots.model(0)


def test_recompute_keeps_no_snapshots(tiny_model_dir):
    learner = _learner(tiny_model_dir, algorithm={"old_logprobs": "recompute"}, trainer={"async_ratio": 2})
    learner.step(_stale_batch(learner))
    assert learner.snapshots.keep == 0 and 0 not in learner.snapshots


def test_skip_advances_version_and_schedule_but_not_the_weights(tiny_model_dir):
    learner = _learner(tiny_model_dir, optim={"lr": 1e-2, "schedule": "linear"}, trainer={"steps": 4})
    weights = {k: v.clone() for k, v in learner.model.state_dict().items()}
    lrs = [learner.scheduler.get_last_lr()[0]]
    for _ in range(2):
        assert learner.skip() == {"train/skipped": 1.0}
        lrs.append(learner.scheduler.get_last_lr()[0])
    assert learner.version == 2
    assert lrs == pytest.approx([1e-2, 0.75e-2, 0.5e-2])
    assert all(torch.equal(learner.model.state_dict()[k], v) for k, v in weights.items())
    assert 0 in learner.snapshots and 1 in learner.snapshots
    metrics = learner.step(_stale_batch(learner, version=2))
    assert metrics["train/lr"] == pytest.approx(0.5e-2)


def test_epochs_take_that_many_optimizer_steps_on_one_version_and_later_passes_see_the_moved_ratio(tiny_model_dir):
    trajectories = [_trajectory([300, 301, 302, 303]), _trajectory([400, 401, 402, 403, 404])]
    once, twice = (_learner(tiny_model_dir, optim={"lr": 1e-3}, algorithm={"epochs": n}) for n in (1, 2))
    batch = _batch(once, trajectories, [1.0, -1.0])
    first = once.step(batch)
    again = twice.step(batch)

    assert once.version == twice.version == 1  # one published version per training step, however many passes
    assert {s["step"].item() for s in twice.optimizer.state.values()} == {2}  # every parameter stepped twice
    assert twice.scheduler.last_epoch == once.scheduler.last_epoch == 1
    assert again["train/loss"] < first["train/loss"]  # the last pass's loss is taken at the once-moved weights
    objective = [(_agent_logprob_sums(learner, batch) * batch.advantages).sum() for learner in (once, twice)]
    assert objective[1] > objective[0]  # two passes went further up the advantage-weighted logprobs


def test_activation_checkpointing_recomputes_each_layer_and_gives_the_same_step(tiny_model_dir):
    trajectories = [_trajectory([10, 11, 12, 13]), _trajectory([20, 21], prompt=PROMPT[:2])]
    results = []
    for checkpointing in (False, True):
        learner = _learner(tiny_model_dir, optim={"grad_clip": None},
                           trainer={"activation_checkpointing": checkpointing})
        batch = _batch(learner, trajectories, [1.0, -0.5], shift=0.3)
        calls, layer = [], learner.model.base_model.layers[0]
        layer.forward = _counting(layer.forward, calls)
        metrics = learner.step(batch)
        grads = torch.cat([p.grad.flatten() for p in learner.model.parameters() if p.grad is not None])
        results.append((len(calls), grads, metrics["train/loss"]))
    (plain_calls, plain, plain_loss), (checkpointed_calls, checkpointed, checkpointed_loss) = results
    assert checkpointed_calls == 2 * plain_calls > 0  # each layer runs again in the backward pass
    torch.testing.assert_close(checkpointed, plain, rtol=1e-5, atol=1e-6)
    assert checkpointed_loss == pytest.approx(plain_loss, rel=1e-6)


def _counting(forward: Any, calls: list[int]) -> Any:
    """``forward``, counting its calls in ``calls`` (a recomputation runs it, though not the module's hooks)."""
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return forward(*args, **kwargs)
    return counted



@pytest.mark.parametrize("aggregation", ["token-mean", "sequence-mean"])
@pytest.mark.parametrize("micro_batch_size", [4, 1])
def test_a_trajectory_in_segments_trains_as_its_one_row_does(tiny_model_dir, aggregation, micro_batch_size):
    """Two turns as one row, or as two segments (the second repeating the first's context untrained, as a fresh
    rendering does): the same contexts, so the same loss, gradient and trainer logprobs."""
    first, observation, second = [10, 11, 12], [50, 51], [20, 21, 22, 23]
    whole = _trajectory(first + observation + second)
    whole.loss_mask[len(PROMPT) + len(first):len(PROMPT) + len(first) + len(observation)] = [0, 0]
    opening = PROMPT + first
    split = Trajectory(
        env_id=VOWELS_ID, token_ids=opening + whole.token_ids, segments=[len(opening)],
        loss_mask=[0] * len(PROMPT) + [1] * len(first) + [0] * (len(opening) + len(observation)) + [1] * len(second),
        logprobs=[0.0] * (2 * len(opening) + len(observation) + len(second)),
        versions=[-1] * len(PROMPT) + [0] * len(first) + [-1] * (len(opening) + len(observation)) + [0] * len(second))
    other = _trajectory([30, 31], prompt=PROMPT[:3])
    results = []
    for trajectories in ([whole, other], [split, other]):
        learner = _learner(tiny_model_dir, optim={"grad_clip": None}, trainer={"micro_batch_size": micro_batch_size},
                           algorithm={"loss": {"aggregation": aggregation}})
        batch = _batch(learner, trajectories, [1.0, -0.5])
        metrics = learner.step(batch)
        grads = torch.cat([p.grad.flatten() for p in learner.model.parameters()])
        results.append((grads, metrics, by_trajectory(learner.trainer_logprobs)[0]))
    (grads, metrics, logprobs), (split_grads, split_metrics, split_logprobs) = results
    assert grads.abs().max() > 0.1
    torch.testing.assert_close(split_grads, grads, rtol=1e-4, atol=1e-6)
    for key in ("train/loss", "train/policy_loss", "train/clip_fraction"):
        assert split_metrics[key] == pytest.approx(metrics[key], rel=1e-4, abs=1e-7), key
    assert len(split_logprobs) == len(logprobs) == len(first) + len(second)
    assert split_logprobs == pytest.approx(logprobs, abs=1e-5)
