"""Off-policy corrections between the behaviour policy (what the engine sampled with) and ``pi_old``.

All three act on the ratio ``rho = pi_old / pi_behaviour`` of agent tokens, detached: with ``pi_old``
recomputed by the trainer it is the proximal policy of decoupled PPO, so every correction leaves the
PPO ratio ``pi_theta / pi_old`` alone and only re-weights or masks its loss. ``level`` picks the unit:

- ``token``: each token's own ``rho_t``;
- ``sequence``: ``prod_t rho_t`` over the row's agent tokens (the masked sum of log ratios), the
  trajectory's likelihood ratio, broadcast to its tokens (verl ``rollout_is="sequence"``);
- ``geometric``: ``(prod_t rho_t)^(1/|T|)``, the per-token geometric mean of the row, which does not
  grow with length; verl uses it for masking with tight bounds (e.g. ``[0.999, 1.001]``).

Corrections (``tis`` and ``decoupled`` choose the weight, ``mask`` combines with either):

- TIS, truncated importance sampling: weight ``min(rho, C)`` (Yao et al. 2025; verl, slime), ``C = 2``.
- Decoupled PPO (Hilton et al. 2021; AReaL): weight ``rho`` untruncated. AReaL's cap on that weight
  masks the tokens above it, which is ``mask=(0, cap)`` here.
- Masked importance sampling (IcePop, Ling team 2025; verl's rejection sampling): a unit whose ``rho``
  lies outside ``[low, high]`` gets no gradient. Both bounds are inclusive: ``rho == low`` and
  ``rho == high`` are kept, anything beyond is masked (compared in log space, so a bound reached
  exactly by ``log pi_old - log pi_behaviour == log(bound)`` stays in). A masked token still counts in
  the loss's normaliser, as in IcePop's objective and AReaL.

When ``pi_behaviour == pi_old`` every ``rho`` is 1, every weight is 1 and nothing is masked, so each
correction reduces to plain PPO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import field_validator, model_validator

from agentgym.algorithms.metrics import effective_sample_size, mismatch_k3
from agentgym.config import Config

__all__ = ["Correction", "CorrectionConfig", "off_policy_correction"]


class CorrectionConfig(Config):
    """How the loss corrects for the gap between the behaviour policy and ``pi_old``."""

    tis: float | None = 2.0
    """Truncated importance sampling: a unit's weight is ``min(pi_old / pi_behaviour, tis)``; null: none."""
    mask: tuple[float, float] | None = None
    """IcePop ``[low, high]``, bounds kept: a unit whose ratio lies outside gets no gradient; null: none."""
    level: Literal["token", "sequence", "geometric"] = "token"
    """Unit of the ratio: a token, a sequence (product of its ratios) or its per-token geometric mean."""
    decoupled: bool = False
    """Decoupled PPO (AReaL): weight by the untruncated ``pi_old / pi_behaviour``, ``pi_old`` the proximal."""

    @field_validator("tis")
    @classmethod
    def _positive(cls, tis: float | None) -> float | None:
        if tis is not None and not tis > 0:
            raise ValueError("must be a positive truncation C (2.0 is usual) or null")
        return tis

    @field_validator("mask")
    @classmethod
    def _around_one(cls, mask: tuple[float, float] | None) -> tuple[float, float] | None:
        if mask is not None and not 0 <= mask[0] <= 1 <= mask[1]:
            raise ValueError("must be [low, high] with 0 <= low <= 1 <= high (e.g. [0.5, 2.0])")
        return mask

    @model_validator(mode="after")
    def _one_weight(self) -> CorrectionConfig:
        if self.decoupled and self.tis is not None:
            raise ValueError(
                "decoupled=true weights by the untruncated ratio and tis truncates it: set tis=null "
                "for decoupled PPO, or decoupled=false for TIS"
            )
        return self


@dataclass(frozen=True)
class Correction:
    """Per-token factors of the loss: ``weights`` (0 where masked) and ``keep``, with ``train/`` metrics."""

    weights: torch.Tensor
    keep: torch.Tensor
    metrics: dict[str, float]


def off_policy_correction(
    old_logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    config: CorrectionConfig,
) -> Correction:
    """The weights and mask of ``config`` for ``[B, T]`` logprobs of ``pi_old`` and the behaviour policy."""
    agent = loss_mask.bool()
    log_ratio = torch.where(agent, (old_logprobs - behaviour_logprobs).detach(), 0.0)
    if config.level == "token":
        unit_log_ratio, unit = log_ratio, agent
    else:
        counts = agent.sum(-1)
        unit_log_ratio = log_ratio.sum(-1)
        if config.level == "geometric":
            unit_log_ratio = unit_log_ratio / counts.clamp(min=1)
        unit = counts > 0
    ratio = unit_log_ratio.exp()
    if config.tis is not None:
        weights = ratio.clamp(max=config.tis)
    elif config.decoupled:
        weights = ratio
    else:
        weights = torch.ones_like(ratio)
    keep = unit
    if config.mask is not None:
        low, high = config.mask
        log_low = math.log(low) if low > 0 else -math.inf
        keep = unit & (unit_log_ratio >= log_low) & (unit_log_ratio <= math.log(high))
    weights = torch.where(keep, weights, 0.0)
    metrics = _metrics(ratio[unit], weights[unit], keep[unit], config)
    metrics["train/mismatch_k3"] = mismatch_k3(old_logprobs, behaviour_logprobs, loss_mask).item()
    if config.level != "token":
        weights, keep = weights[:, None].expand_as(agent), keep[:, None] & agent
    return Correction(weights=weights, keep=keep, metrics=metrics)


def _metrics(
    ratio: torch.Tensor, weights: torch.Tensor, keep: torch.Tensor, config: CorrectionConfig
) -> dict[str, float]:
    """Statistics over the units (tokens or sequences) of the raw ratio and of the weights applied
    (all 0 when the batch has no agent token)."""
    names = (
        "is_ratio_mean",
        "is_ratio_min",
        "is_ratio_max",
        "is_weight_mean",
        "ess",
        "ess_fraction",
        "mask_fraction",
        "tis_fraction",
    )
    if ratio.numel() == 0:
        return {f"train/{name}": 0.0 for name in names}
    ess = effective_sample_size(weights).item()
    truncated = ratio > config.tis if config.tis is not None else torch.zeros_like(keep)
    values = (
        ratio.mean(),
        ratio.min(),
        ratio.max(),
        weights.mean(),
        ess,
        ess / ratio.numel(),
        (~keep).float().mean(),
        truncated.float().mean(),
    )
    return {f"train/{name}": float(value) for name, value in zip(names, values, strict=True)}
