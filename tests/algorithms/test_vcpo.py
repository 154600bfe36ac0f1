"""VCPO's ESS-scaled learning rate and minimum-variance baseline against a NumPy reference, and their reduction to
plain GRPO when every importance weight is equal."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.algorithms import grpo
from agentgym.algorithms.vcpo import (
    effective_sample_size_log,
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
