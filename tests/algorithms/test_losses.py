"""The PPO policy loss against hand-computed values: clip, asymmetric clip, dual clip, aggregation."""

from __future__ import annotations

import math

import pytest
import torch

from agentgym.algorithms import CorrectionConfig, PolicyLossConfig, aggregate, policy_loss
from agentgym.config import load_config
from agentgym.errors import ConfigError

PLAIN = CorrectionConfig(tis=None)


def logs(*ratios: float) -> torch.Tensor:
    return torch.tensor([[math.log(r) for r in ratios]])


def ppo(
    ratios: tuple[float, ...], advantages: list[float], **config: object
) -> tuple[torch.Tensor, dict, torch.Tensor]:
    """Loss, metrics and gradient of one row whose learner/old ratios are ``ratios`` (behaviour == old)."""
    logprobs = logs(*ratios).requires_grad_()
    old = torch.zeros_like(logprobs)
    loss, metrics = policy_loss(
        logprobs,
        old,
        old,
        torch.tensor([advantages]),
        torch.ones_like(old),
        PolicyLossConfig(correction=PLAIN, **config),
    )
    loss.backward()
    return loss, metrics, logprobs.grad


def test_ppo_clip_takes_the_pessimistic_term() -> None:
    # ratio 1.5, A=+1: max(-1.5, -1.2) = -1.2 (clipped)    ratio 0.5, A=+1: max(-0.5, -0.8) = -0.5
    # ratio 1.1, A=+1: -1.1 (inside the range)             ratio 1.5, A=-1: max(1.5, 1.2) = 1.5
    loss, metrics, grad = ppo((1.5, 0.5, 1.1, 1.5), [1, 1, 1, -1])
    assert loss.item() == pytest.approx((-1.2 - 0.5 - 1.1 + 1.5) / 4)
    assert metrics["train/clip_fraction"] == 0.25
    assert metrics["train/policy_loss"] == pytest.approx(-0.325)
    # d/dlogp of -A * ratio is -A * ratio; the clipped token has none; token-mean divides by 4
    torch.testing.assert_close(grad, torch.tensor([[0.0, -0.5, -1.1, 1.5]]) / 4)


def test_low_and_high_epsilon_are_separate() -> None:
    # clip_high 0.28: ratio 1.25, A=+1 stays -1.25; clip_low 0.2: ratio 0.75, A=-1 -> max(0.75, 0.8) = 0.8
    loss, metrics, _ = ppo((1.25, 0.75), [1, -1], clip_low=0.2, clip_high=0.28)
    assert loss.item() == pytest.approx((-1.25 + 0.8) / 2)
    assert metrics["train/clip_fraction"] == 0.5
    # symmetric 0.2 clips both: (-1.2 + 0.8) / 2
    loss, metrics, _ = ppo((1.25, 0.75), [1, -1])
    assert loss.item() == pytest.approx(-0.2)
    assert metrics["train/clip_fraction"] == 1.0


def test_dual_clip_bounds_the_loss_of_negative_advantages() -> None:
    # ratio 5, A=-1: max(5, 1.2) = 5 -> bounded by c * |A| = 3;  ratio 2, A=-1: 2 < 3 stays;
    # ratio 5, A=+1: max(-5, -1.2) = -1.2, a positive advantage is never dual-clipped
    loss, metrics, grad = ppo((5.0, 2.0, 5.0), [-1, -1, 1], dual_clip=3.0)
    assert loss.item() == pytest.approx((3 + 2 - 1.2) / 3)
    assert metrics["train/dual_clip_fraction"] == pytest.approx(1 / 3)
    torch.testing.assert_close(grad, torch.tensor([[0.0, 2.0, 0.0]]) / 3)  # the bound is a constant
    loss, _, _ = ppo((5.0, 2.0, 5.0), [-1, -1, 1])
    assert loss.item() == pytest.approx((5 + 2 - 1.2) / 3)


def test_token_mean_and_sequence_mean_differ_on_ragged_masks() -> None:
    losses = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 99.0, 99.0, 99.0], [7.0, 7.0, 7.0, 7.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]])  # the last row has no agent token
    assert aggregate(losses, mask, "token-mean").item() == pytest.approx((1 + 2 + 3 + 4 + 10) / 5)  # 4
    assert aggregate(losses, mask, "sequence-mean").item() == pytest.approx((2.5 + 10) / 2)  # 6.25
    with pytest.raises(ValueError, match="choose one of: token-mean, sequence-mean"):
        aggregate(losses, mask, "sum")  # type: ignore[arg-type]


def test_policy_loss_aggregates_per_config_and_logs_entropy() -> None:
    # ratio 1, A = +1 / -2 per row: token losses -1 (4 tokens) and +2 (1 token)
    logprobs = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    entropy = torch.tensor([[1.0, 1.0, 1.0, 1.0], [6.0, 50.0, 50.0, 50.0]])
    args = (logprobs, logprobs.detach(), logprobs.detach(), torch.tensor([1.0, -2.0]), mask)
    token, metrics = policy_loss(*args, PolicyLossConfig(correction=PLAIN), entropy=entropy)
    assert token.item() == pytest.approx((-4 + 2) / 5)
    assert metrics["train/entropy"] == pytest.approx(10 / 5)
    sequence, _ = policy_loss(*args, PolicyLossConfig(correction=PLAIN, aggregation="sequence-mean"))
    assert sequence.item() == pytest.approx((-1 + 2) / 2)


def test_approx_kl_is_k3_between_old_and_learner() -> None:
    # ratios 2 and 0.5: (2 - 1 - ln 2 + 0.5 - 1 + ln 2) / 2 = 0.25
    _, metrics, _ = ppo((2.0, 0.5), [1, 1])
    assert metrics["train/approx_kl"] == pytest.approx(0.25)


def test_shapes_are_checked_with_the_argument_named() -> None:
    x = torch.zeros(2, 3)
    with pytest.raises(
        ValueError, match=r"behaviour_logprobs must have the shape of logprobs \[2, 3\], got \[2, 2\]"
    ):
        policy_loss(x, x, torch.zeros(2, 2), torch.zeros(2), x)
    with pytest.raises(ValueError, match=r"advantages must be \[B\] or \[B, T\]"):
        policy_loss(x, x, x, torch.zeros(3), x)


def test_config_errors_name_the_setting() -> None:
    with pytest.raises(ConfigError, match="dual_clip"):
        load_config(PolicyLossConfig, overrides=["dual_clip=1.0"])
    with pytest.raises(ConfigError, match="correction.mask"):
        load_config(PolicyLossConfig, overrides=["correction.mask=[1.5, 2.0]"])
    with pytest.raises(ConfigError, match="tis=null"):
        load_config(PolicyLossConfig, overrides=["correction.decoupled=true"])
    config = load_config(
        PolicyLossConfig, overrides=["correction.mask=[0.5, 2.0]", "correction.level=sequence"]
    )
    assert config.correction.mask == (0.5, 2.0) and config.correction.tis == 2.0
