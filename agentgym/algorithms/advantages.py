"""Outcome advantages, one per trajectory, from its reward and its group (the samples of one task).

``valid`` marks the trajectories that may enter statistics: an errored one (``status == "error"``, an
infrastructure failure, not a reward) gets advantage 0 and changes no other trajectory's advantage. In the
group estimators a group with fewer than two valid members, or whose valid rewards are all equal, gives 0.
Broadcast the result over a trajectory's agent tokens for the policy loss (it takes ``[B]`` directly).

- ``grpo``: ``(r - mean) / (std + eps)`` within the group (Shao et al. 2024), ``std`` with Bessel's
  correction as verl and TRL compute it.
- ``dr_grpo``: ``r - mean``, no std division (Liu et al. 2025, "Understanding R1-Zero-Like Training").
- ``rloo``: ``r - mean of the other valid members`` (Ahmadian et al. 2024), i.e. ``n/(n-1) (r - mean)``.
- ``mc_grpo``: ``(r - median) / (std + eps)``, GRPO with the group median as baseline (Kim 2026,
  arXiv:2601.22582); ``scale_by_std=False`` is its Dr. GRPO form ``r - median``. The paper samples an odd
  group (G + 1) so one pivot sits exactly at the median with advantage 0 and no gradient; an even group
  takes the midpoint of its two middle rewards.
- ``reinforce_pp``: REINFORCE++ (Hu et al. 2025): ``(r - mean) / (std + eps)`` over every valid trajectory
  of the batch, groups ignored; ``group_baseline=True`` subtracts the group mean first
  (REINFORCE++-baseline). Statistics are per trajectory: verl and OpenRLHF whiten per token, which weighs a
  long trajectory more and agrees when lengths are equal. Its per-token KL reward shaping belongs to the
  trainer's loss (a KL term) and is not part of this estimator.

Each estimator is registered by name (:func:`register_advantage`); ``algorithm.advantage`` names one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from agentgym.algorithms.registry import Registry

__all__ = ["ADVANTAGES", "AdvantageFn", "compute_advantages", "dr_grpo", "get_advantage_fn", "grpo", "mc_grpo",
           "register_advantage", "reinforce_pp", "rloo"]

EPS = 1e-6
"""Added to a standard deviation before dividing by it (verl's value)."""

AdvantageFn = Callable[..., torch.Tensor]
"""An advantage estimator: ``(rewards [B], groups, valid [B] or None, **options)`` to ``[B]`` advantages."""

ADVANTAGES = Registry("advantage estimator")
"""The advantage estimators by name (:func:`register_advantage` adds one)."""

E = TypeVar("E", bound=AdvantageFn)


def register_advantage(name: str) -> Callable[[E], E]:
    """A decorator that registers an advantage estimator as ``name``, which ``algorithm.advantage`` then takes."""
    return ADVANTAGES.register(name)


def get_advantage_fn(name: str) -> AdvantageFn:
    """The advantage estimator registered as ``name``; an unknown name is a ``ValueError`` listing the known."""
    return ADVANTAGES.lookup(name)


@register_advantage("grpo")
def grpo(
    rewards: torch.Tensor,
    groups: torch.Tensor | Sequence[int],
    valid: torch.Tensor | None = None,
    *,
    eps: float = EPS,
) -> torch.Tensor:
    """GRPO: the reward's z-score within its group."""
    return _per_group(rewards, groups, valid, lambda r: (r - r.mean()) / (r.std() + eps))


@register_advantage("dr_grpo")
def dr_grpo(
    rewards: torch.Tensor, groups: torch.Tensor | Sequence[int], valid: torch.Tensor | None = None
) -> torch.Tensor:
    """Dr. GRPO: the reward minus its group's mean."""
    return _per_group(rewards, groups, valid, lambda r: r - r.mean())


@register_advantage("rloo")
def rloo(
    rewards: torch.Tensor, groups: torch.Tensor | Sequence[int], valid: torch.Tensor | None = None
) -> torch.Tensor:
    """RLOO: the reward minus the mean of the other members of its group."""
    return _per_group(rewards, groups, valid, lambda r: r - (r.sum() - r) / (r.numel() - 1))


@register_advantage("mc_grpo")
def mc_grpo(
    rewards: torch.Tensor,
    groups: torch.Tensor | Sequence[int],
    valid: torch.Tensor | None = None,
    *,
    scale_by_std: bool = True,
    eps: float = EPS,
) -> torch.Tensor:
    """MC-GRPO: the reward minus its group's median, over the group's std unless ``scale_by_std`` is off."""

    def centred(r: torch.Tensor) -> torch.Tensor:
        advantages = r - torch.quantile(r, 0.5)
        return advantages / (r.std() + eps) if scale_by_std else advantages

    return _per_group(rewards, groups, valid, centred)


@register_advantage("reinforce_pp")
def reinforce_pp(
    rewards: torch.Tensor,
    groups: torch.Tensor | Sequence[int],
    valid: torch.Tensor | None = None,
    *,
    group_baseline: bool = False,
    eps: float = EPS,
) -> torch.Tensor:
    """REINFORCE++: the reward's z-score over the batch (group mean off first with ``group_baseline``)."""
    rewards, valid = _validated(rewards, groups, valid)
    if group_baseline:
        rewards = dr_grpo(rewards, groups, valid)
    return _per_group(
        rewards,
        torch.zeros_like(rewards, dtype=torch.long),
        valid,
        lambda r: (r - r.mean()) / (r.std() + eps),
    )


def compute_advantages(
    name: str,
    rewards: torch.Tensor,
    groups: torch.Tensor | Sequence[int],
    valid: torch.Tensor | None = None,
    **kwargs: Any,
) -> torch.Tensor:
    """The advantages of the estimator registered as ``name``, with its keyword options."""
    return get_advantage_fn(name)(rewards, groups, valid, **kwargs)


def _validated(
    rewards: torch.Tensor, groups: torch.Tensor | Sequence[int], valid: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Float rewards and a boolean ``valid`` of the same length as ``groups``; errors name the mismatch."""
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (one per trajectory), got shape {list(rewards.shape)}")
    if len(groups) != rewards.numel():
        raise ValueError(f"groups must give one group id per reward ({rewards.numel()}), got {len(groups)}")
    valid = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid.bool()
    if valid.shape != rewards.shape:
        raise ValueError(
            f"valid must be one flag per reward ({rewards.numel()}), got shape {list(valid.shape)}"
        )
    return rewards.float() if not rewards.is_floating_point() else rewards, valid


def _per_group(
    rewards: torch.Tensor,
    groups: torch.Tensor | Sequence[int],
    valid: torch.Tensor | None,
    estimator: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """Apply ``estimator`` to the valid rewards of each group; 0 for the invalid, lone and all-equal ones."""
    rewards, valid = _validated(rewards, groups, valid)
    groups = torch.as_tensor(groups, device=rewards.device)
    advantages = torch.zeros_like(rewards)
    for group in torch.unique(groups[valid]):
        members = valid & (groups == group)
        group_rewards = rewards[members]
        if group_rewards.numel() >= 2 and not torch.all(group_rewards == group_rewards[0]):
            advantages[members] = estimator(group_rewards)
    return advantages
