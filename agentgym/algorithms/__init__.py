"""Pure functions over tensors for policy-gradient training: advantages, the PPO policy loss, off-policy
corrections and their metrics."""

from __future__ import annotations

from agentgym.algorithms.advantages import (
    ADVANTAGES,
    compute_advantages,
    dr_grpo,
    grpo,
    mc_grpo,
    reinforce_pp,
    rloo,
)
from agentgym.algorithms.corrections import Correction, CorrectionConfig, off_policy_correction
from agentgym.algorithms.losses import Aggregation, PolicyLossConfig, aggregate, policy_loss
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
    "Aggregation",
    "Correction",
    "CorrectionConfig",
    "PolicyLossConfig",
    "aggregate",
    "compute_advantages",
    "dr_grpo",
    "effective_sample_size",
    "entropy_from_logits",
    "grad_norm",
    "grpo",
    "k3_kl",
    "masked_mean",
    "mc_grpo",
    "mismatch_k3",
    "off_policy_correction",
    "policy_loss",
    "reinforce_pp",
    "rloo",
]
