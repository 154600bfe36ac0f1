"""Training diagnostics over masked per-token tensors: k3 KL, effective sample size, entropy, grad norm."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.distributed.tensor import DTensor


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is set (0 when nothing is); what the others hold, inf or nan
    included, changes neither the mean nor its gradient."""
    mask = mask.bool()
    return torch.where(mask, values, 0.0).sum() / mask.sum().clamp(min=1).to(values.dtype)


def k3_kl(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of ``KL(q || p)`` from samples of ``q``: the masked mean of
    ``exp(x) - x - 1`` with ``x = log p - log q`` per token; never negative, 0 exactly when ``p == q``."""
    log_ratio = torch.where(mask.bool(), log_ratio, 0.0)
    return masked_mean(torch.expm1(log_ratio) - log_ratio, mask)


def mismatch_k3(
    old_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, loss_mask: torch.Tensor
) -> torch.Tensor:
    """k3 estimate of ``KL(behaviour || old)`` over agent tokens, which the behaviour policy sampled."""
    return k3_kl((old_logprobs - behaviour_logprobs).detach(), loss_mask)


def effective_sample_size(weights: torch.Tensor) -> torch.Tensor:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of 1-D importance weights: ``n`` for ``n``
    equal weights, 1 when one weight carries everything, 0 when all are 0."""
    total, squares = weights.sum(), weights.square().sum()
    return torch.where(squares > 0, total.square() / squares.clamp(min=torch.finfo(weights.dtype).tiny), 0.0)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of ``softmax(logits)`` over the last axis, one value per position."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    return -(logprobs.exp() * logprobs).sum(-1)


def grad_norm(parameters: Iterable[torch.nn.Parameter]) -> float:
    """Global L2 norm of the gradients of ``parameters`` (those without a gradient count as 0); sharded (FSDP)
    gradients count whole: their shards' norms are combined across the ranks, which must all call it."""
    grads = [p.grad.detach().float() for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    total = torch.nn.utils.get_total_norm(grads)
    return float((total.full_tensor() if isinstance(total, DTensor) else total).item())
