"""VCPO's ESS-scaled learning rate, minimum-variance baseline and logits estimate of the gradient norms against
hand-computed values and references (NumPy, autograd), and their reduction to plain GRPO when every importance
weight is equal."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.algorithms import grpo
from agentgym.algorithms.vcpo import (
    EssScale,
    baseline_metrics,
    effective_sample_size_log,
    ess_lr_scale,
    logit_score_norms,
    lr_factor,
    min_variance_advantages,
    sequence_log_weights,
)


def _reference(rewards, groups, weights, norms_sq, scale_by_std):
    """Advantages and baselines as VCPO's compute_opob_baseline writes them, in float64 NumPy."""
    advantages, baselines = np.zeros(len(rewards)), np.zeros(len(rewards))
    for group in np.unique(groups):
        members = groups == group
        r, mass = rewards[members], weights[members] ** 2 * norms_sq[members]
        baselines[members] = r.mean()
        if len(r) < 2 or np.all(r == r[0]):
            continue
        baselines[members] = (mass * r).sum() / mass.sum()
        centred = r - baselines[members]
        advantages[members] = centred / (r.std(ddof=1) + 1e-6) if scale_by_std else centred
    return advantages, baselines


def test_the_baseline_on_crafted_values_is_the_hand_computed_one():
    """Group 0: w = (1, 2, 1), |g|^2 = (1, 1, 4), R = (1, 0, 0): masses 1, 4, 4, so b* = 1/9; group 1 is uniform."""
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 1, 1])
    log_weights = torch.log(torch.tensor([1.0, 2.0, 1.0, 3.0, 1.0]))
    norms = torch.tensor([1.0, 1.0, 4.0, 2.0, 5.0])
    advantages, baselines = min_variance_advantages(rewards, groups, log_weights, norms, scale_by_std=False)
    torch.testing.assert_close(baselines, torch.tensor([1 / 9, 1 / 9, 1 / 9, 1.0, 1.0]))
    torch.testing.assert_close(advantages, torch.tensor([8 / 9, -1 / 9, -1 / 9, 0.0, 0.0]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.0, 0.5, 1.0]), st.floats(-3, 3),
                          st.floats(1e-3, 50)), min_size=1, max_size=24),
       st.booleans())
def test_the_baseline_matches_the_numpy_reference(rows, scale_by_std):
    groups, rewards, log_weights, norms = (np.array(column) for column in zip(*rows))
    expected_advantages, expected_baselines = _reference(rewards, groups, np.exp(log_weights), norms, scale_by_std)
    advantages, baselines = min_variance_advantages(torch.tensor(rewards), torch.tensor(groups),
                                                    torch.tensor(log_weights), torch.tensor(norms),
                                                    scale_by_std=scale_by_std)
    np.testing.assert_allclose(baselines.numpy(), expected_baselines, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(advantages.numpy(), expected_advantages, rtol=1e-4, atol=1e-4)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.0, 0.25, 1.0])), min_size=1, max_size=24),
       st.floats(-5, 5), st.floats(1e-2, 10))
def test_equal_weights_and_gradient_norms_give_grpo_exactly(rows, log_weight, norm):
    groups, rewards = (torch.tensor(column) for column in zip(*rows))
    advantages, _ = min_variance_advantages(rewards.float(), groups, torch.full((len(rows),), log_weight),
                                            torch.full((len(rows),), norm), scale_by_std=True)
    torch.testing.assert_close(advantages, grpo(rewards.float(), groups), rtol=1e-5, atol=1e-6)


def test_huge_log_weights_neither_overflow_nor_lose_the_baseline():
    """Log weights of a long, stale trajectory (hundreds of nats) cancel in b* and in the ESS."""
    rewards, groups = torch.tensor([1.0, 0.0]), torch.tensor([0, 0])
    _, baselines = min_variance_advantages(rewards, groups, torch.tensor([800.0, 799.0]), torch.ones(2),
                                           scale_by_std=False)
    expected = math.exp(2) / (math.exp(2) + 1)  # masses e^1600 : e^1598
    assert baselines[0].item() == pytest.approx(expected, rel=1e-6)
    assert effective_sample_size_log(torch.tensor([800.0, 800.0])) == pytest.approx(2.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-20, 20), min_size=1, max_size=64))
def test_ess_matches_kish_on_the_weights(log_weights):
    w = np.exp(np.array(log_weights, dtype=np.float64))
    assert effective_sample_size_log(torch.tensor(log_weights)) == pytest.approx(w.sum() ** 2 / (w**2).sum(), rel=1e-6)


def test_lr_factor_follows_each_rule():
    assert lr_factor(0.25, 1.0, "sqrt") == pytest.approx(0.5)
    assert lr_factor(0.25, 1.0, "linear") == pytest.approx(0.25)
    assert lr_factor(0.25, 0.5, "linear") == pytest.approx(0.5)
    assert lr_factor(0.8, 0.5, "sqrt") == 1.0  # at or above the base: the full rate
    assert lr_factor(0.01, 1.0, "off") == 1.0


def test_sequence_log_weights_sum_the_agent_tokens_only():
    old = torch.tensor([[0.0, -1.0, -2.0], [-1.0, -1.0, -1.0]])
    behaviour = torch.tensor([[5.0, -1.5, -1.0], [-2.0, -2.0, -2.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    torch.testing.assert_close(sequence_log_weights(old, behaviour, mask), torch.tensor([-0.5, 2.0]))


def test_the_ess_scale_on_crafted_weights_is_the_hand_computed_one():
    """w = (1, 1, 2): ESS = 4^2 / 6 = 8/3, its ratio 8/9; under base 1 the square-root rule takes sqrt(8/9)."""
    log_weights = torch.log(torch.tensor([1.0, 1.0, 2.0]))
    ess, ratio, factor = ess_lr_scale(log_weights, 1.0, "sqrt")
    assert (ess, ratio, factor) == pytest.approx((8 / 3, 8 / 9, math.sqrt(8 / 9)))
    assert ess_lr_scale(log_weights, 0.5, "linear").lr_factor == 1.0  # above the base: the full rate
    assert ess_lr_scale(torch.tensor([]), 1.0, "sqrt") == EssScale(0.0, 1.0, 1.0)  # no trajectory: the plain step


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-30, 30), min_size=1, max_size=64), st.sampled_from(["sqrt", "linear", "off"]),
       st.floats(0.01, 1.0))
def test_the_ess_ratio_lies_between_one_trajectory_and_all(log_weights, rule, base):
    """``1/n <= ESS / n <= 1``, and the rate is never raised above the schedule's."""
    scale = ess_lr_scale(torch.tensor(log_weights), base, rule)
    assert 1 / len(log_weights) - 1e-9 <= scale.ratio <= 1 + 1e-9
    assert 0 < scale.lr_factor <= 1.0
    assert scale.lr_factor == lr_factor(scale.ratio, base, rule)


def test_baseline_metrics_on_crafted_values_are_the_hand_computed_ones():
    """b* = (1/9, 1/9, 1/9, 1, 1) against the group means (1/3, 1/3, 1/3, 1, 1): mean 7/15, shift (3 * 2/9) / 5."""
    rewards, groups = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0]), torch.tensor([0, 0, 0, 1, 1])
    metrics = baseline_metrics(rewards, groups, torch.tensor([1 / 9, 1 / 9, 1 / 9, 1.0, 1.0]))
    assert metrics == pytest.approx({"train/baseline_mean": 7 / 15, "train/baseline_shift": 2 / 15})


def test_logit_score_norms_on_crafted_logits_are_the_hand_computed_ones():
    """Two vocabulary entries. Row 0: uniform logits at T = 1, p_y = 1/2: 1 - 1 + 1/2 = 1/2, twice. Row 1: z / T =
    (0, ln 3) at T = 2, p = (1/4, 3/4), y = 1: (1 - 3/2 + 10/16) / 4 = 1/32."""
    agent = torch.tensor([[True, True], [False, False]])
    uniform = logit_score_norms(torch.zeros(2, 2), torch.tensor([0, 1]), agent, 1.0)
    torch.testing.assert_close(uniform, torch.tensor([1.0, 0.0], dtype=torch.float64))
    skewed = logit_score_norms(torch.tensor([[0.0, 2 * math.log(3)]]), torch.tensor([1]),
                               torch.tensor([[False, False], [False, True]]), 2.0)
    torch.testing.assert_close(skewed, torch.tensor([0.0, 1 / 32], dtype=torch.float64))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(2, 7), st.floats(0.3, 2.0), st.integers(0, 2**31))
def test_logit_score_norms_are_autograd_s_gradient_norms(rows, cols, vocabulary, temperature, seed):
    """Each row's value is ``|grad_z sum_t log softmax(z_t / T)[y_t]|^2`` over its agent tokens' logits."""
    generator = torch.Generator().manual_seed(seed)
    agent = torch.rand(rows, cols, generator=generator) < 0.6
    logits = (torch.randn(int(agent.sum()), vocabulary, generator=generator, dtype=torch.float64) * 3).requires_grad_()
    targets = torch.randint(vocabulary, (int(agent.sum()),), generator=generator)
    picked = torch.log_softmax(logits / temperature, -1).gather(-1, targets[:, None]).squeeze(-1)
    expected = []
    for row in range(rows):
        tokens = agent.nonzero()[:, 0] == row
        (grad,) = torch.autograd.grad(picked[tokens].sum(), logits, retain_graph=True, allow_unused=True)
        expected.append(0.0 if grad is None else grad.square().sum().item())
    norms = logit_score_norms(logits.detach(), targets, agent, temperature)
    np.testing.assert_allclose(norms.numpy(), expected, rtol=1e-4, atol=1e-6)  # computed in float32
