"""VCPO's variance control for far off-policy steps (Stable Asynchrony, mit-han-lab/vcpo): an effective-sample-size
scaled learning rate and the minimum-variance off-policy baseline.

A trajectory's importance weight is its likelihood ratio ``w_i = prod_t pi_theta / pi_behaviour`` over its agent
tokens, ``pi_theta`` the weights the step starts from (VCPO's ``old_log_prob``, verl's recomputed one), kept in log
space: ``l_i = sum_t log pi_theta - log pi_behaviour``. It measures how far off-policy the data is, whichever
``pi_old`` the loss uses. Over a step's ``n`` trajectories:

- ESS ``= (sum w)^2 / sum w^2`` (Kish), and the step's learning rate is ``lr * sqrt(min(1, (ESS / n) / base))``
  (``linear`` drops the square root). Equal weights give ``ESS = n``: the step is the plain one.
- The baseline of a group is ``b* = sum w_i^2 |g_i|^2 R_i / sum w_i^2 |g_i|^2``, ``g_i = grad log pi(tau_i)``:
  the one that minimises the variance of the importance-weighted gradient. Equal weights and equal gradient
  norms give the group mean, so GRPO's advantages come back exactly.

Every function works on the log weights, whose scale cancels in both ratios, so no ``exp`` overflows however
long or stale a trajectory is.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from agentgym.algorithms.advantages import EPS
from agentgym.config import Config

__all__ = ["VcpoConfig", "effective_sample_size_log", "lr_factor", "min_variance_advantages",
           "sequence_log_weights"]


class VcpoConfig(Config):
    """VCPO (``algorithm.vcpo``): the ESS-scaled step and the minimum-variance baseline; off by default."""

    lr_scaling: Literal["sqrt", "linear", "off"] = "off"
    """Scale the step's learning rate by ``min(1, ESS ratio / base_ess_ratio)``, its square root (VCPO's rule),
    or not at all."""
    base_ess_ratio: float = Field(1.0, gt=0, le=1)
    """The ESS ratio (ESS / trajectories) at and above which the step takes the full learning rate."""
    baseline: Literal["group_mean", "min_variance"] = "group_mean"
    """Each group's baseline: its mean reward (the advantage estimator's own), or VCPO's minimum-variance
    ``b*`` (with ``advantage: grpo`` or ``dr_grpo``)."""
    grad_norm: Literal["exact", "logits"] = "exact"
    """``|grad log pi(tau_i)|`` for ``b*``: ``exact``, one backward pass per trajectory; ``logits``, the norm of the
    gradient with respect to the logits at its tokens (no extra backward pass; it leaves out how positions share
    weights, see docs/training.md for how close it comes)."""
    collapse_ess_ratio: float = Field(0.25, ge=0, le=1)
    """Below this ESS ratio the progress line says the step's weights collapsed onto a few trajectories."""


def sequence_log_weights(policy: torch.Tensor, behaviour: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B]`` log importance weights ``sum_t (log pi - log pi_behaviour)`` over each row's agent tokens."""
    return torch.where(mask.bool(), policy - behaviour, 0.0).sum(-1)


def effective_sample_size_log(log_weights: torch.Tensor) -> float:
    """Kish's ESS ``(sum w)^2 / sum w^2`` from log weights (``n`` for equal ones, 1 for one dominant)."""
    if log_weights.numel() == 0:
        return 0.0
    log_weights = log_weights.double()
    return math.exp(2 * torch.logsumexp(log_weights, 0).item() - torch.logsumexp(2 * log_weights, 0).item())


def lr_factor(ess_ratio: float, base_ess_ratio: float, rule: Literal["sqrt", "linear", "off"]) -> float:
    """The multiplier of the step's learning rate for an ESS ratio (``ESS / n``)."""
    if rule == "off":
        return 1.0
    scale = min(1.0, ess_ratio / base_ess_ratio)
    return math.sqrt(scale) if rule == "sqrt" else scale


def min_variance_advantages(rewards: torch.Tensor, groups: torch.Tensor, log_weights: torch.Tensor,
                            grad_norms_sq: torch.Tensor, *, scale_by_std: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B]`` advantages ``R_i - b*`` of each row's group (divided by the group's reward std, Bessel-corrected as
    GRPO's, with ``scale_by_std``) and ``[B]`` the baseline ``b*`` each row's group used. As in GRPO, a group with
    fewer than two members or all-equal rewards gets 0 (and its mean as baseline); a group whose weights are all
    0 (every gradient norm 0) falls back to its mean."""
    rewards = rewards.double()
    advantages, baselines = torch.zeros_like(rewards), torch.zeros_like(rewards)
    for group in torch.unique(groups):
        members = groups == group
        r = rewards[members]
        baselines[members] = r.mean()
        if r.numel() < 2 or torch.all(r == r[0]):
            continue
        log_mass = 2 * log_weights[members].double() + torch.log(grad_norms_sq[members].double())
        if torch.isfinite(log_mass).any():
            mass = torch.softmax(log_mass, 0)  # w^2 |g|^2, normalised: the scale cancels in b*
            baselines[members] = (mass * r).sum()
        centred = r - baselines[members]
        advantages[members] = centred / (r.std() + EPS) if scale_by_std else centred
    return advantages.float(), baselines.float()
