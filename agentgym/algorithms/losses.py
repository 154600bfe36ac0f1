"""Policy losses over ``[B, T]`` token tensors, registered by name, with off-policy corrections.

:func:`policy_loss` runs the loss ``algorithm.loss.name`` names (:func:`register_policy_loss` adds one): it checks
the shapes, hands the loss the log ratio ``log pi_theta - log pi_old`` and the advantages, weighs the per-token
losses it returns by the correction's weight, zeroes those the correction masks
(:mod:`agentgym.algorithms.corrections`), aggregates and logs.

``ppo``, the default, is PPO's clipped objective per agent token, with ``ratio = pi_theta / pi_old`` and
advantage ``A`` (Schulman et al. 2017): ``loss = max(-A * ratio, -A * clip(ratio, 1 - clip_low, 1 + clip_high))``;
separate bounds are DAPO's clip-higher. Dual clip (Ye et al. 2020) bounds the loss of a negative advantage by
``-A * dual_clip``, so a huge ratio on a bad token cannot blow up the update. Aggregation:

- ``token-mean``: the sum over every agent token of the batch divided by their number (DAPO);
- ``sequence-mean``: each row's mean over its agent tokens, then the mean over rows that have any
  (GRPO's original form: a short answer's tokens weigh more than a long one's). A trajectory split into several
  rows (token segments) passes its whole agent-token count as each row's ``sequence_tokens``, so its rows' sums
  add up to its one mean.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

import torch
from pydantic import Field, field_validator

from agentgym.algorithms.corrections import CorrectionConfig, off_policy_correction
from agentgym.algorithms.metrics import k3_kl, masked_mean
from agentgym.algorithms.registry import Registry
from agentgym.config import Config

__all__ = ["POLICY_LOSSES", "Aggregation", "PolicyLossConfig", "PolicyLossFn", "aggregate", "get_policy_loss_fn",
           "policy_loss", "ppo_loss", "register_policy_loss"]

Aggregation = Literal["token-mean", "sequence-mean"]


class PolicyLossConfig(Config):
    """The policy loss: which one, its clip range and dual clip, aggregation and off-policy correction."""

    name: str = "ppo"
    """The registered policy loss (:func:`register_policy_loss`): ``ppo``, PPO's clipped objective, or your own."""
    clip_low: float = Field(0.2, ge=0, lt=1)
    """Lower clip epsilon: the ratio is clipped from below at ``1 - clip_low``."""
    clip_high: float = Field(0.2, ge=0)
    """Upper clip epsilon: the ratio is clipped from above at ``1 + clip_high`` (DAPO's clip-higher: 0.28)."""
    dual_clip: float | None = None
    """Dual clip ``c > 1``: a negative advantage's loss is at most ``-c * A`` (3.0 is usual); null: off."""
    aggregation: Aggregation = "token-mean"
    """How token losses become one number: mean over all agent tokens, or mean of per-sequence means."""
    correction: CorrectionConfig = CorrectionConfig()
    """Off-policy correction between the behaviour policy and ``pi_old``."""

    @field_validator("dual_clip")
    @classmethod
    def _above_one(cls, dual_clip: float | None) -> float | None:
        if dual_clip is not None and not dual_clip > 1:
            raise ValueError("must be greater than 1 (3.0 is usual) or null")
        return dual_clip

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        get_policy_loss_fn(name)  # an unknown name is a bad value of this key, listing the registered ones
        return name


PolicyLossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, PolicyLossConfig],
                        tuple[torch.Tensor, dict[str, float]]]
"""A policy loss: ``(log_ratio, advantages, agent, config)`` to ``[B, T]`` token losses and their metrics.
``log_ratio`` is ``log pi_theta - log pi_old`` (``[B, T]``, with grad; 0 off the agent tokens, so ``exp`` is safe),
``advantages`` ``[B, 1]`` or ``[B, T]`` (detached), ``agent`` the ``[B, T]`` boolean agent-token mask. Values off the
agent tokens are dropped; :func:`policy_loss` applies the correction and the aggregation."""

POLICY_LOSSES = Registry("policy loss")
"""The policy losses by name (:func:`register_policy_loss` adds one)."""

L = TypeVar("L", bound=PolicyLossFn)


def register_policy_loss(name: str) -> Callable[[L], L]:
    """A decorator that registers a policy loss as ``name``, which ``algorithm.loss.name`` then takes."""
    return POLICY_LOSSES.register(name)


def get_policy_loss_fn(name: str) -> PolicyLossFn:
    """The policy loss registered as ``name``; an unknown name is a ``ValueError`` listing the known."""
    return POLICY_LOSSES.lookup(name)


def aggregate(token_losses: torch.Tensor, loss_mask: torch.Tensor, aggregation: Aggregation,
              sequence_tokens: torch.Tensor | None = None) -> torch.Tensor:
    """Reduce ``[B, T]`` token losses over the agent tokens of ``loss_mask`` (rows without any left out); a
    sequence-mean divides each row's sum by its ``[B]`` ``sequence_tokens`` where given, else by its own count."""
    if aggregation == "token-mean":
        return masked_mean(token_losses, loss_mask)
    if aggregation == "sequence-mean":
        mask = loss_mask.bool()
        counts = mask.sum(-1)
        rows = counts > 0
        divisor = counts if sequence_tokens is None else sequence_tokens.to(counts.device)
        return masked_mean(torch.where(mask, token_losses, 0.0).sum(-1) / divisor.clamp(min=1), rows)
    raise ValueError(f"unknown aggregation {aggregation!r}; choose one of: token-mean, sequence-mean")


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    config: PolicyLossConfig | None = None,
    *,
    entropy: torch.Tensor | None = None,
    sequence_tokens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The corrected policy loss ``config.name`` of ``[B, T]`` learner logprobs (with grad) against ``pi_old``, and
    its ``train/`` metrics. ``advantages`` is ``[B]`` (one per trajectory) or ``[B, T]``; ``entropy``
    (``[B, T]``) is only logged; ``sequence_tokens`` (``[B]``) as :func:`aggregate` takes it; no ``config``:
    :class:`PolicyLossConfig`'s defaults (clip 0.2, TIS at 2)."""
    config = config or PolicyLossConfig()
    _check_shapes(
        logprobs,
        old_logprobs=old_logprobs,
        behaviour_logprobs=behaviour_logprobs,
        loss_mask=loss_mask,
        **({"entropy": entropy} if entropy is not None else {}),
    )
    if advantages.dim() == 1:
        advantages = advantages[:, None]
    if advantages.shape not in ((logprobs.shape[0], 1), logprobs.shape):
        raise ValueError(
            f"advantages must be [B] or [B, T] = {list(logprobs.shape)}, got {list(advantages.shape)}"
        )
    advantages = advantages.detach().to(logprobs.dtype)
    agent = loss_mask.bool()
    # masked before exp: a padded -1e4 would give ratio inf there, and 0 * inf = nan in the backward pass
    log_ratio = torch.where(agent, logprobs - old_logprobs.detach(), 0.0)
    token_losses, metrics = get_policy_loss_fn(config.name)(log_ratio, advantages, agent, config)
    correction = off_policy_correction(old_logprobs, behaviour_logprobs, loss_mask, config.correction)
    token_losses = torch.where(correction.keep, correction.weights * token_losses, 0.0)
    loss = aggregate(token_losses, loss_mask, config.aggregation, sequence_tokens)
    metrics["train/policy_loss"] = loss.item()
    metrics["train/approx_kl"] = k3_kl(log_ratio.detach(), agent).item()
    metrics.update(correction.metrics)
    if entropy is not None:
        metrics["train/entropy"] = masked_mean(entropy.detach(), agent).item()
    return loss, metrics


@register_policy_loss("ppo")
def ppo_loss(log_ratio: torch.Tensor, advantages: torch.Tensor, agent: torch.Tensor, config: PolicyLossConfig
             ) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's clipped objective per token, with separate low and high clips and the dual clip; logs the fractions
    of agent tokens each clip bound."""
    ratio = log_ratio.exp()
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - config.clip_low, 1 + config.clip_high)
    token_losses = torch.maximum(unclipped, clipped)
    metrics = {"train/clip_fraction": masked_mean((clipped > unclipped).float(), agent).item()}
    if config.dual_clip is not None:
        bound = -advantages * config.dual_clip
        dual = (advantages < 0) & (token_losses > bound)
        token_losses = torch.where(dual, bound, token_losses)
        metrics["train/dual_clip_fraction"] = masked_mean(dual.float(), agent).item()
    return token_losses, metrics


def _check_shapes(logprobs: torch.Tensor, **others: torch.Tensor) -> None:
    """Every per-token tensor must be ``[B, T]`` like ``logprobs``; the message names the one that is not."""
    if logprobs.dim() != 2:
        raise ValueError(f"logprobs must be [B, T], got shape {list(logprobs.shape)}")
    for name, tensor in others.items():
        if tensor.shape != logprobs.shape:
            raise ValueError(
                f"{name} must have the shape of logprobs {list(logprobs.shape)}, got {list(tensor.shape)}"
            )
