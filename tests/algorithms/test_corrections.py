"""Off-policy corrections against hand-computed values: TIS at C, IcePop bounds, levels, decoupled PPO."""

from __future__ import annotations

import math

import pytest
import torch

from agentgym.algorithms import (
    Correction,
    CorrectionConfig,
    PolicyLossConfig,
    off_policy_correction,
    policy_loss,
)

LN2 = math.log(2)


def logs(*ratios: float) -> torch.Tensor:
    return torch.tensor([[math.log(r) for r in ratios]])


def correct(old: torch.Tensor, loss_mask: torch.Tensor | None = None, **config: object) -> Correction:
    """The correction for ``pi_old`` logprobs ``old`` against a behaviour policy with logprob 0 everywhere."""
    loss_mask = torch.ones_like(old) if loss_mask is None else loss_mask
    return off_policy_correction(old, torch.zeros_like(old), loss_mask, CorrectionConfig(**config))


def test_tis_truncates_the_weight_at_exactly_c() -> None:
    # ratios pi_old / pi_behaviour: 3 -> C = 2, 2 -> 2 (at C), 1.9 and 0.5 pass through, 1 -> 1
    correction = correct(logs(3.0, 2.0, 1.9, 0.5, 1.0))
    assert correction.weights[0, 0].item() == 2.0  # truncated to C itself, not near it
    torch.testing.assert_close(correction.weights, torch.tensor([[2.0, 2.0, 1.9, 0.5, 1.0]]))
    assert correction.keep.all()
    assert correction.metrics["train/is_ratio_max"] == pytest.approx(3.0)
    assert correction.metrics["train/is_weight_mean"] == pytest.approx((2 + 2 + 1.9 + 0.5 + 1) / 5)


def test_tis_fraction_counts_ratios_above_c() -> None:
    correction = correct(logs(3.0, 1.9, 0.5, 1.0), tis=2.0)
    assert correction.metrics["train/tis_fraction"] == 0.25
    assert correct(logs(3.0, 1.9), tis=None).metrics["train/tis_fraction"] == 0.0


def test_tis_weights_the_ppo_loss() -> None:
    # learner == old (ratio 1), A = +1: each token's loss is -1, times its weight [2, 2, 0.5, 1]; mean over 4
    old = logs(3.0, 2.5, 0.5, 1.0)
    loss, metrics = policy_loss(
        old.clone(), old, torch.zeros_like(old), torch.tensor([1.0]), torch.ones_like(old)
    )
    assert loss.item() == pytest.approx(-(2 + 2 + 0.5 + 1) / 4)
    assert metrics["train/tis_fraction"] == 0.5


def test_mask_keeps_both_bounds_and_drops_what_lies_beyond() -> None:
    # log ratios: ln 2 (= high, kept), ln 2 + 1e-3 (above: masked), ln 0.5 (= low, kept),
    # ln 0.5 - 1e-3 (below: masked), 0 (kept)
    old = torch.tensor([[LN2, LN2 + 1e-3, -LN2, -LN2 - 1e-3, 0.0]])
    correction = correct(old, tis=None, mask=(0.5, 2.0))
    assert correction.keep.tolist() == [[True, False, True, False, True]]
    assert correction.weights.tolist() == [[1.0, 0.0, 1.0, 0.0, 1.0]]
    assert correction.metrics["train/mask_fraction"] == pytest.approx(2 / 5)
    assert correction.metrics["train/ess"] == pytest.approx(3.0)  # three equal weights left
    # in the loss a masked token contributes 0 but still counts in the token-mean's denominator: -3 / 5
    loss, _ = policy_loss(
        old.clone(),
        old,
        torch.zeros_like(old),
        torch.tensor([1.0]),
        torch.ones_like(old),
        PolicyLossConfig(correction=CorrectionConfig(tis=None, mask=(0.5, 2.0))),
    )
    assert loss.item() == pytest.approx(-0.6)


def test_mask_combines_with_tis() -> None:
    # ratios 3 (masked above 2.5), 2.2 (kept, truncated to 2), 0.5 (kept)
    correction = correct(logs(3.0, 2.2, 0.5), tis=2.0, mask=(0.4, 2.5))
    torch.testing.assert_close(correction.weights, torch.tensor([[0.0, 2.0, 0.5]]))


def test_sequence_level_uses_the_product_over_agent_tokens() -> None:
    # row 0: 3 * 0.5 = 1.5 (the prompt token at ratio 100 is not an agent token); row 1: 3 * 3 = 9 -> C = 2
    old = torch.tensor([[math.log(100), math.log(3), math.log(0.5)], [0.0, math.log(3), math.log(3)]])
    mask = torch.tensor([[0, 1, 1], [0, 1, 1]])
    correction = correct(old, mask, level="sequence")
    torch.testing.assert_close(correction.weights * mask, torch.tensor([[0.0, 1.5, 1.5], [0.0, 2.0, 2.0]]))
    assert correction.metrics["train/is_ratio_max"] == pytest.approx(9.0)  # statistics are per sequence
    assert correction.metrics["train/tis_fraction"] == 0.5


def test_sequence_and_geometric_masks_at_the_bound() -> None:
    old = torch.tensor(
        [[LN2, 0.0], [2 * LN2, 0.0], [LN2, 1e-3]]
    )  # products 2, 4, 2.002; geometric means sqrt
    sequence = correct(old, tis=None, mask=(0.5, 2.0), level="sequence")
    assert sequence.keep.tolist() == [[True, True], [False, False], [False, False]]
    # geometric means: sqrt 2, 2 (= high, kept), sqrt 2.002
    geometric = correct(old, tis=None, mask=(0.5, 2.0), level="geometric")
    assert geometric.keep.all()
    geometric = correct(old, tis=None, mask=(0.5, 1.5), level="geometric")
    assert geometric.keep.tolist() == [[True, True], [False, False], [True, True]]


def test_decoupled_weights_by_the_untruncated_proximal_over_behaviour() -> None:
    # learner/proximal 1.5 with A = +1: max(-1.5, -1.2) = -1.2; proximal/behaviour 4 -> -4.8 (TIS: 2 -> -2.4)
    proximal = torch.tensor([[0.0]])
    learner, behaviour = proximal + math.log(1.5), proximal - math.log(4)
    decoupled = PolicyLossConfig(correction=CorrectionConfig(tis=None, decoupled=True))
    loss, metrics = policy_loss(
        learner, proximal, behaviour, torch.tensor([1.0]), torch.ones(1, 1), decoupled
    )
    assert loss.item() == pytest.approx(-4.8)
    assert metrics["train/clip_fraction"] == 1.0
    loss, _ = policy_loss(learner, proximal, behaviour, torch.tensor([1.0]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(-2.4)


def test_decoupled_equals_standard_ppo_when_proximal_is_behaviour() -> None:
    generator = torch.Generator().manual_seed(0)
    learner = torch.randn(3, 5, generator=generator).requires_grad_()
    behaviour = torch.randn(3, 5, generator=generator)
    advantages, mask = (
        torch.randn(3, generator=generator),
        (torch.rand(3, 5, generator=generator) > 0.3).float(),
    )
    decoupled = PolicyLossConfig(correction=CorrectionConfig(tis=None, decoupled=True))
    standard = PolicyLossConfig(correction=CorrectionConfig(tis=None))
    ours, _ = policy_loss(learner, behaviour, behaviour, advantages, mask, decoupled)
    ppo, _ = policy_loss(learner, behaviour, behaviour, advantages, mask, standard)
    assert ours.item() == ppo.item()
    assert torch.equal(torch.autograd.grad(ours, learner)[0], torch.autograd.grad(ppo, learner)[0])


def test_mismatch_k3_is_reported() -> None:
    # log ratios ln 2, ln 0.5: (2 - ln 2 - 1 + 0.5 + ln 2 - 1) / 2 = 0.25
    assert correct(logs(2.0, 0.5)).metrics["train/mismatch_k3"] == pytest.approx(0.25)
    assert correct(logs(1.0, 1.0)).metrics["train/mismatch_k3"] == 0.0


def test_no_agent_token_gives_zero_metrics() -> None:
    correction = correct(torch.zeros(2, 3), torch.zeros(2, 3), level="sequence")
    assert not correction.keep.any()
    assert set(correction.metrics.values()) == {0.0}
