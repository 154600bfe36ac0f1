"""Diagnostics against hand-computed values: k3 KL, effective sample size, entropy, grad norm."""

from __future__ import annotations

import math

import pytest
import torch

from agentgym.algorithms import (
    effective_sample_size,
    entropy_from_logits,
    grad_norm,
    k3_kl,
    masked_mean,
    mismatch_k3,
)


def test_k3_is_zero_when_equal_and_matches_the_formula() -> None:
    logprobs = torch.tensor([[-0.3, -2.0, -0.7]])
    assert mismatch_k3(logprobs, logprobs, torch.ones(1, 3)).item() == 0.0
    # x = log p - log q = [ln 2, ln 0.5, ln 3 (not an agent token)]: mean of e^x - x - 1 over the first two
    # = (2 - ln 2 - 1 + 0.5 + ln 2 - 1) / 2 = 0.25
    x = torch.tensor([[math.log(2), math.log(0.5), math.log(3)]])
    mask = torch.tensor([[1, 1, 0]])
    assert k3_kl(x, mask).item() == pytest.approx(0.25)
    assert mismatch_k3(x - 1.0, torch.full_like(x, -1.0), mask).item() == pytest.approx(0.25)
    assert k3_kl(torch.tensor([math.log(3)]), torch.tensor([1])).item() == pytest.approx(2 - math.log(3))


def test_effective_sample_size() -> None:
    assert effective_sample_size(torch.full((5,), 0.7)).item() == pytest.approx(5.0)  # uniform weights: n
    assert effective_sample_size(torch.tensor([1.0, 0.0, 0.0])).item() == pytest.approx(1.0)
    assert effective_sample_size(torch.tensor([3.0, 1.0])).item() == pytest.approx(16 / 10)
    assert effective_sample_size(torch.zeros(4)).item() == 0.0


def test_entropy_from_logits() -> None:
    logits = torch.log(torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.25, 0.75, 1e-30, 1e-30]]))
    expected = [math.log(4), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))]  # ln 4, 0.562335
    torch.testing.assert_close(entropy_from_logits(logits), torch.tensor(expected))


def test_grad_norm_is_the_global_l2_norm() -> None:
    layer = torch.nn.Linear(2, 1)
    layer(torch.tensor([[3.0, 4.0]])).sum().backward()  # d/dw = [3, 4], d/db = 1
    assert grad_norm(layer.parameters()) == pytest.approx(math.sqrt(9 + 16 + 1))
    assert grad_norm(torch.nn.Linear(2, 1).parameters()) == 0.0


def test_masked_mean_of_nothing_is_zero() -> None:
    assert masked_mean(torch.ones(3), torch.zeros(3)).item() == 0.0
    assert masked_mean(torch.tensor([1.0, 5.0, 9.0]), torch.tensor([1, 0, 1])).item() == 5.0
