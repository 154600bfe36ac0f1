"""VCPO's variance control for far off-policy steps (Stable Asynchrony, mit-han-lab/vcpo): an effective-sample-size
scaled learning rate and the minimum-variance off-policy baseline.

A trajectory's importance weight is its likelihood ratio ``w_i = prod_t pi_theta / pi_behaviour`` over its agent
tokens, ``pi_theta`` the weights the step starts from (VCPO's ``old_log_prob``, verl's recomputed one), kept in log
space: ``l_i = sum_t log pi_theta - log pi_behaviour``. It measures how far off-policy the data is, whichever
``pi_old`` the loss uses. Over a step's ``n`` trajectories:

- ESS ``= (sum w)^2 / sum w^2`` (Kish), and the step's learning rate is ``lr * sqrt(min(1, (ESS / n) / base))``
  (``linear`` drops the square root): :func:`ess_lr_scale`. Equal weights give ``ESS = n``: the step is the plain
  one.
- The baseline of a group is ``b* = sum w_i^2 |g_i|^2 R_i / sum w_i^2 |g_i|^2``, ``g_i = grad log pi(tau_i)``:
  the one that minimises the variance of the importance-weighted gradient (:func:`min_variance_advantages`).
  Equal weights and equal gradient norms give the group mean, so GRPO's advantages come back exactly. The trainer
  takes ``|g_i|^2`` from a backward pass per trajectory, or estimates it from the logits
  (:func:`logit_score_norms`).

Every function works on the log weights, whose scale cancels in both ratios, so no ``exp`` overflows however
long or stale a trajectory is.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch
from pydantic import Field

from agentgym.algorithms.advantages import EPS
from agentgym.config import Config

__all__ = ["EssScale", "VcpoConfig", "baseline_metrics", "effective_sample_size_log", "ess_lr_scale",
           "logit_score_norms", "lr_factor", "min_variance_advantages", "sequence_log_weights"]


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


class EssScale(NamedTuple):
    """A step's effective sample size and what it does to the learning rate (:func:`ess_lr_scale`)."""

    ess: float
    """Kish's ESS of the step's sequence weights."""
    ratio: float
    """ESS over the number of trajectories (1 for a step without any)."""
    lr_factor: float
    """The multiplier of the step's learning rate."""


def ess_lr_scale(log_weights: torch.Tensor, base_ess_ratio: float, rule: Literal["sqrt", "linear", "off"]
                 ) -> EssScale:
    """The ESS of a step's ``[n]`` sequence log weights (every rank's), its ESS ratio, and the learning rate's
    multiplier under ``rule`` (VCPO's ``sqrt``, ``linear`` or ``off``)."""
    ess = effective_sample_size_log(log_weights)
    ratio = ess / log_weights.numel() if log_weights.numel() else 1.0
    return EssScale(ess, ratio, lr_factor(ratio, base_ess_ratio, rule))


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


def baseline_metrics(rewards: torch.Tensor, groups: torch.Tensor, baselines: torch.Tensor) -> dict[str, float]:
    """``train/baseline_mean``, the mean of the ``[B]`` per-row ``baselines`` that :func:`min_variance_advantages`
    returns, and ``train/baseline_shift``, their mean distance from the baseline of equal weights and gradient
    norms: each group's mean reward."""
    ones = torch.ones_like(rewards)
    _, means = min_variance_advantages(rewards, groups, torch.zeros_like(rewards), ones, scale_by_std=False)
    return {"train/baseline_mean": baselines.mean().item(),
            "train/baseline_shift": (baselines - means).abs().mean().item()}


def logit_score_norms(logits: torch.Tensor, targets: torch.Tensor, agent: torch.Tensor, temperature: float
                      ) -> torch.Tensor:
    """``[B]`` squared norms of ``grad log softmax(z / T)[y]`` with respect to the logits ``z`` (``[N, V]``, the
    ``N`` agent tokens of ``[B, T]`` ``agent`` in row-major order, ``targets`` their ``[N]`` ids), summed over each
    row's tokens: ``|e_y - p|^2 / T^2 = (1 - 2 p_y + sum p^2) / T^2`` per token. VCPO's ``|g_i|^2`` without a
    backward pass, leaving out how positions share weights."""
    probabilities = torch.softmax(logits.float() / temperature, -1)
    picked = probabilities.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    per_token = (1 - 2 * picked + probabilities.square().sum(-1)) / temperature**2
    rows = agent.nonzero()[:, 0]
    return torch.zeros(agent.shape[0], dtype=torch.float64, device=logits.device).index_add_(0, rows, per_token.double())
