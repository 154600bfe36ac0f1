"""Pure functions over tensors for policy-gradient training: advantage estimators and policy losses, registered by
name (:func:`register_advantage`, :func:`register_policy_loss`), off-policy corrections and their metrics."""

from __future__ import annotations

from agentgym.algorithms.advantages import (
    ADVANTAGES,
    AdvantageFn,
    compute_advantages,
    dr_grpo,
    get_advantage_fn,
    grpo,
    mc_grpo,
    register_advantage,
    reinforce_pp,
    rloo,
)
from agentgym.algorithms.corrections import Correction, CorrectionConfig, off_policy_correction
from agentgym.algorithms.losses import (
    POLICY_LOSSES,
    Aggregation,
    PolicyLossConfig,
    PolicyLossFn,
    aggregate,
    get_policy_loss_fn,
    policy_loss,
    ppo_loss,
    register_policy_loss,
)
from agentgym.algorithms.metrics import (
    effective_sample_size,
    entropy_from_logits,
    grad_norm,
    k3_kl,
    masked_mean,
    mismatch_k3,
)

__all__ = [
    "ADVANTAGES",
    "POLICY_LOSSES",
    "AdvantageFn",
    "Aggregation",
    "Correction",
    "CorrectionConfig",
    "PolicyLossConfig",
    "PolicyLossFn",
    "aggregate",
    "compute_advantages",
    "dr_grpo",
    "effective_sample_size",
    "entropy_from_logits",
    "get_advantage_fn",
    "get_policy_loss_fn",
    "grad_norm",
    "grpo",
    "k3_kl",
    "masked_mean",
    "mc_grpo",
    "mismatch_k3",
    "off_policy_correction",
    "policy_loss",
    "ppo_loss",
    "register_advantage",
    "register_policy_loss",
    "reinforce_pp",
    "rloo",
]
