"""Hypothesis properties: corrections reduce to plain PPO on-policy; advantages ignore what they should."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.algorithms import (
    ADVANTAGES,
    CorrectionConfig,
    PolicyLossConfig,
    compute_advantages,
    policy_loss,
)

CORRECTIONS = [
    CorrectionConfig(),
    CorrectionConfig(tis=1.0),
    CorrectionConfig(level="sequence"),
    CorrectionConfig(tis=1.5, level="geometric"),
    CorrectionConfig(tis=None, mask=(0.5, 2.0)),
    CorrectionConfig(tis=None, mask=(1.0, 1.0), level="sequence"),
    CorrectionConfig(tis=None, mask=(0.999, 1.001), level="geometric"),
    CorrectionConfig(tis=None, decoupled=True),
    CorrectionConfig(tis=None, decoupled=True, mask=(0.0, 5.0), level="sequence"),
    CorrectionConfig(tis=2.0, mask=(0.5, 2.0), level="sequence"),
]
PLAIN = CorrectionConfig(tis=None)


@st.composite
def batches(draw: st.DrawFn) -> tuple[torch.Tensor, ...]:
    """Learner and old logprobs, advantages and a ragged loss mask; the learner is sometimes the old."""
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31))
    generator = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, cols, generator=generator, dtype=torch.float64) * 4
    learner = old + torch.randn(rows, cols, generator=generator, dtype=torch.float64) * draw(
        st.sampled_from([0.0, 0.1, 1.0])
    )
    advantages = torch.randn(rows, generator=generator, dtype=torch.float64)
    mask = (torch.rand(rows, cols, generator=generator) < draw(st.sampled_from([0.5, 1.0]))).to(torch.float64)
    return learner, old, advantages, mask


@settings(max_examples=60, deadline=None)
@given(
    batches(),
    st.sampled_from(CORRECTIONS),
    st.sampled_from(["token-mean", "sequence-mean"]),
    st.sampled_from([None, 3.0]),
)
def test_every_correction_is_plain_ppo_when_behaviour_is_old(
    batch: tuple[torch.Tensor, ...], correction: CorrectionConfig, aggregation: str, dual_clip: float | None
) -> None:
    learner, old, advantages, mask = batch
    losses, grads = [], []
    for config in (correction, PLAIN):
        logprobs = learner.clone().requires_grad_()
        loss, metrics = policy_loss(
            logprobs,
            old,
            old.clone(),
            advantages,
            mask,
            PolicyLossConfig(correction=config, aggregation=aggregation, dual_clip=dual_clip),
        )
        loss.backward()
        losses.append(loss.detach())
        grads.append(logprobs.grad)
        assert metrics["train/mask_fraction"] == 0.0 and metrics["train/mismatch_k3"] == 0.0
    torch.testing.assert_close(losses[0], losses[1], rtol=0, atol=1e-12)
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=1e-12)


@st.composite
def grouped_rewards(draw: st.DrawFn) -> tuple[torch.Tensor, list[int], torch.Tensor]:
    """Integer-valued rewards (so equal stays equal under shifts), group ids and a validity mask."""
    size = draw(st.integers(1, 12))
    rewards = draw(st.lists(st.integers(0, 5), min_size=size, max_size=size))
    rewards = torch.tensor(rewards, dtype=torch.float64)
    groups = draw(st.lists(st.integers(0, 3), min_size=size, max_size=size))
    valid = torch.tensor(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    return rewards, groups, valid


GROUP_ESTIMATORS = [
    ("grpo", {}),
    ("dr_grpo", {}),
    ("rloo", {}),
    ("mc_grpo", {}),
    ("mc_grpo", {"scale_by_std": False}),
    ("reinforce_pp", {"group_baseline": True}),
]


@settings(max_examples=80, deadline=None)
@given(
    grouped_rewards(),
    st.sampled_from(GROUP_ESTIMATORS),
    st.lists(st.integers(-20, 20), min_size=4, max_size=4),
)
def test_group_advantages_ignore_a_constant_added_to_a_group(
    data: tuple, estimator: tuple[str, dict], shifts: list[int]
) -> None:
    rewards, groups, valid = data
    name, options = estimator
    shifted = rewards + torch.tensor([float(shifts[g]) for g in groups], dtype=torch.float64)
    torch.testing.assert_close(
        compute_advantages(name, shifted, groups, valid, **options),
        compute_advantages(name, rewards, groups, valid, **options),
        rtol=0,
        atol=1e-9,
    )


@settings(max_examples=40, deadline=None)
@given(grouped_rewards(), st.integers(-20, 20))
def test_reinforce_pp_ignores_a_constant_added_to_the_batch(data: tuple, shift: int) -> None:
    rewards, groups, valid = data
    torch.testing.assert_close(
        ADVANTAGES["reinforce_pp"](rewards + shift, groups, valid),
        ADVANTAGES["reinforce_pp"](rewards, groups, valid),
        rtol=0,
        atol=1e-9,
    )


@settings(max_examples=80, deadline=None)
@given(grouped_rewards(), st.sampled_from(sorted(ADVANTAGES)), st.floats(-1e3, 1e3))
def test_errored_trajectories_change_no_other_advantage(data: tuple, name: str, junk: float) -> None:
    rewards, groups, valid = data
    advantages = compute_advantages(name, rewards, groups, valid)
    assert torch.all(advantages[~valid] == 0)
    # whatever an errored trajectory's reward, and whether it is in the batch at all, the others do not move
    scrambled = torch.where(valid, rewards, torch.tensor(junk, dtype=torch.float64))
    torch.testing.assert_close(compute_advantages(name, scrambled, groups, valid), advantages, rtol=0, atol=0)
    kept = [g for g, ok in zip(groups, valid.tolist(), strict=True) if ok]
    alone = compute_advantages(name, rewards[valid], kept)
    torch.testing.assert_close(alone, advantages[valid], rtol=0, atol=0)
