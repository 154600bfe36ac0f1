"""VCPO in the learner: the ESS-scaled step and the minimum-variance baseline on the tiny model."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym.algorithms.vcpo import min_variance_advantages
from agentgym.trainers.batch import TrainBatch, collate, shares
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.learner import Learner
from agentgym.trainers.parallel import AgentLogits
from agentgym.trajectory import Trajectory
from tests.trainers.envs import VOWELS_ID

PROMPT = [5, 17, 42, 99, 7, 250]
RESPONSES = [[10, 11, 12, 13], [20, 21], [30, 31, 32, 33, 34, 35], [40, 41, 42], [50, 51, 52, 53, 54], [60, 61, 62]]
REWARDS = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0]
GROUPS = [0, 0, 0, 1, 1, 1]


def _learner(model_dir: Any, vcpo: dict[str, Any] | None = None, trainer: dict[str, Any] | None = None,
             **algorithm: Any) -> Learner:
    config = TrainConfig.model_validate({
        "output_dir": "unused", "model": {"path": str(model_dir)}, "env": {"id": VOWELS_ID},
        "optim": {"lr": 1e-3, "grad_clip": None}, "sampling": {"temperature": 0.8},
        "algorithm": {"vcpo": vcpo or {}, **algorithm}, "trainer": {"micro_batch_size": 4, **(trainer or {})}})
    torch.manual_seed(0)
    return Learner(AutoModelForCausalLM.from_pretrained(model_dir), config)


def _batch(learner: Learner, shifts: list[float]) -> TrainBatch:
    """Two groups of three; behaviour logprobs the model's own minus ``shifts[row]`` on each agent token (so a
    row's sequence log weight is ``shift * tokens``), sorted back into collate's row order."""
    trajectories = [Trajectory(env_id=VOWELS_ID, token_ids=PROMPT + r, loss_mask=[0] * 6 + [1] * len(r),
                               logprobs=[0.0] * (6 + len(r)), versions=[-1] * 6 + [0] * len(r), reward=reward)
                    for r, reward in zip(RESPONSES, REWARDS, strict=True)]
    batch = collate(trajectories, torch.zeros(len(trajectories)), pad_id=0, groups=GROUPS)
    order = sorted(range(len(RESPONSES)), key=lambda i: -len(RESPONSES[i]))
    with torch.no_grad():
        logprobs, _ = learner.logprobs(learner.model, batch)
    offsets = torch.tensor([shifts[i] for i in order])[:, None]
    return replace(batch, behaviour_logprobs=(logprobs - offsets) * batch.loss_mask,
                   advantages=torch.tensor([0.5, -0.5, 1.0, -1.0, 0.25, -0.25]))


def _weights(learner: Learner) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in learner.model.state_dict().items()}


@pytest.mark.parametrize("rule", ["sqrt", "linear"])
def test_equal_weights_give_exactly_the_plain_step(tiny_model_dir, rule):
    """On-policy every sequence weight is 1: ESS = n, the full learning rate, the same weights after the step (to
    float rounding: the step's own forward pass may sum in another order than the one that made the behaviour
    logprobs, leaving log weights of 1e-7 and an ESS ratio 1e-14 short of 1)."""
    plain, vcpo = _learner(tiny_model_dir), _learner(tiny_model_dir, {"lr_scaling": rule})
    plain_metrics = plain.step(_batch(plain, [0.0] * 6))
    metrics = vcpo.step(_batch(vcpo, [0.0] * 6))
    assert metrics["train/ess"] == pytest.approx(6.0) and metrics["train/ess_ratio"] == pytest.approx(1.0)
    assert plain_metrics["train/effective_lr"] == 1e-3
    assert metrics["train/effective_lr"] == pytest.approx(1e-3, rel=1e-12)
    for key, value in _weights(plain).items():
        torch.testing.assert_close(_weights(vcpo)[key], value, rtol=0, atol=1e-12, msg=key)


def test_off_policy_weights_scale_the_step_by_the_root_of_the_ess_ratio(tiny_model_dir):
    shifts = [0.0, 0.3, -0.2, 0.5, 0.1, -0.4]
    learner = _learner(tiny_model_dir, {"lr_scaling": "sqrt", "base_ess_ratio": 0.9})
    metrics = learner.step(_batch(learner, shifts))
    w = np.exp([s * len(r) for s, r in zip(shifts, RESPONSES, strict=True)])
    ratio = w.sum() ** 2 / (w**2).sum() / len(w)
    assert metrics["train/ess_ratio"] == pytest.approx(ratio, rel=1e-4)
    assert ratio < 0.9  # so the step is scaled
    assert metrics["train/effective_lr"] == pytest.approx(1e-3 * np.sqrt(ratio / 0.9), rel=1e-4)
    assert metrics["train/lr"] == 1e-3  # the schedule's rate is left as it was
    assert learner.optimizer.param_groups[0]["lr"] == 1e-3


def _exact_norm(learner: Learner, response: list[int]) -> float:
    """``|grad sum_t log pi(y_t)|^2`` of one trajectory by a separate full forward pass and autograd."""
    ids = torch.tensor([PROMPT + response])
    logits = learner.model(input_ids=ids).logits[0, len(PROMPT) - 1:-1] / 0.8
    total = torch.log_softmax(logits, -1).gather(-1, torch.tensor(response)[:, None]).sum()
    parameters = [p for p in learner.model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(total, parameters, allow_unused=True)
    return float(sum(g.double().square().sum() for g in grads if g is not None))


def test_exact_gradient_norms_are_each_trajectory_s_own(tiny_model_dir):
    learner = _learner(tiny_model_dir, {"baseline": "min_variance"})
    batch = _batch(learner, [0.0] * 6)
    _, norms = learner._scores(batch, exact=True)
    order = sorted(range(len(RESPONSES)), key=lambda i: -len(RESPONSES[i]))
    expected = [_exact_norm(learner, RESPONSES[i]) for i in order]
    np.testing.assert_allclose(norms.numpy(), expected, rtol=1e-4)
    assert all(p.grad is None for p in learner.model.parameters())  # nothing left for the step to add to


def test_the_logits_estimate_ranks_trajectories_as_the_exact_norms_do(tiny_model_dir):
    """The documented estimate: the same order of gradient norms as the exact ones on the tiny model (Spearman's
    rho), and a baseline within a tenth of the reward range of the exact one."""
    learner = _learner(tiny_model_dir, {"baseline": "min_variance"})
    batch = _batch(learner, [0.0, 0.3, -0.2, 0.5, 0.1, -0.4])
    log_weights, exact = learner._scores(batch, exact=True)
    _, estimate = learner._scores(batch, exact=False)
    rho = np.corrcoef(np.argsort(np.argsort(exact.numpy())), np.argsort(np.argsort(estimate.numpy())))[0, 1]
    assert rho >= 0.8
    _, exact_baselines = min_variance_advantages(batch.rewards, batch.groups, log_weights, exact, scale_by_std=True)
    _, estimated = min_variance_advantages(batch.rewards, batch.groups, log_weights, estimate, scale_by_std=True)
    assert (exact_baselines - estimated).abs().max().item() <= 0.1


def test_the_min_variance_step_trains_on_b_star_advantages(tiny_model_dir):
    """The learner replaces each group's mean by b* from the weights and exact norms, and says how far it moved."""
    shifts = [0.0, 0.3, -0.2, 0.5, 0.1, -0.4]
    learner = _learner(tiny_model_dir, {"baseline": "min_variance"})
    batch = _batch(learner, shifts)
    log_weights, norms = learner._scores(batch, exact=True)
    expected, baselines = min_variance_advantages(batch.rewards, batch.groups, log_weights, norms, scale_by_std=True)
    share, metrics = learner._min_variance(shares(batch, 4, 1)[0])
    torch.testing.assert_close(torch.cat([m.advantages for m in share.micro_batches]), expected)
    assert metrics["train/baseline_mean"] == pytest.approx(baselines.mean().item(), rel=1e-5)
    assert metrics["train/baseline_shift"] > 0  # unequal norms and weights move b* off the group mean
    assert "train/baseline_mean" in learner.step(batch)


def test_the_scores_pass_runs_packed_as_the_training_passes_do(tiny_model_dir, monkeypatch):
    """With ``trainer.sequence_packing`` every forward pass of a min-variance step is packed, the scores' too, and
    the log weights and logits estimate are the padded rows' to float rounding."""
    vcpo = {"baseline": "min_variance", "grad_norm": "logits"}
    padded, packed = _learner(tiny_model_dir, vcpo), _learner(tiny_model_dir, vcpo, {"sequence_packing": True})
    batch = _batch(padded, [0.0, 0.3, -0.2, 0.5, 0.1, -0.4])
    calls, forward = [], AgentLogits.forward

    def recorded(self, *args, packed=False, **kwargs):
        calls.append(packed)
        return forward(self, *args, packed=packed, **kwargs)

    monkeypatch.setattr(AgentLogits, "forward", recorded)
    for expected, actual in zip(padded._scores(batch, exact=False), packed._scores(batch, exact=False), strict=True):
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert calls == [False, True]
    packed.step(batch)
    assert all(calls[2:]) and len(calls) > 2


def test_min_variance_needs_a_mean_baseline_to_replace(tiny_model_dir):
    with pytest.raises(ValueError, match="algorithm.vcpo.baseline"):
        _learner(tiny_model_dir, {"baseline": "min_variance"}, advantage="rloo")


@pytest.mark.parametrize(("correction", "old_logprobs"), [
    ({"tis": 2.0}, "exact"),
    ({"tis": None, "mask": [0.5, 2.0]}, "exact"),
    ({"tis": None, "decoupled": True}, "recompute"),
    ({"tis": 2.0, "level": "sequence"}, "recompute"),
])
def test_vcpo_steps_under_every_correction(tiny_model_dir, correction, old_logprobs):
    """The ESS-scaled step and the baseline sit beside the loss's correction, whichever it is and wherever pi_old
    comes from: the same ESS (it reads the weights the step starts from), a scaled rate, weights that move."""
    shifts = [0.0, 0.3, -0.2, 0.5, 0.1, -0.4]
    vcpo = {"lr_scaling": "sqrt", "baseline": "min_variance", "grad_norm": "logits"}
    learner = _learner(tiny_model_dir, vcpo, old_logprobs=old_logprobs, loss={"correction": correction})
    before = _weights(learner)
    metrics = learner.step(_batch(learner, shifts))
    w = np.exp([s * len(r) for s, r in zip(shifts, RESPONSES, strict=True)])
    assert metrics["train/ess_ratio"] == pytest.approx(w.sum() ** 2 / (w**2).sum() / len(w), rel=1e-4)
    assert metrics["train/effective_lr"] < 1e-3 and np.isfinite(metrics["train/loss"])
    assert max((v - before[k]).abs().max().item() for k, v in _weights(learner).items()) > 1e-5
