"""The sampling distribution, written once for the engine that samples and the trainer that scores.

A token is drawn from ``softmax(logits / temperature)`` restricted to the top-p nucleus and
renormalised. Its *behaviour logprob* is its log-probability under exactly that distribution; the
trainer calls :func:`sampling_logprobs` with the same settings to get the matching number under the
learner's weights. With ``temperature == 0`` the token is the argmax and its logprob is taken under
``softmax(logits)`` (temperature 1, no nucleus), since a point mass has nothing to correct.
"""

from __future__ import annotations

import torch


def sampling_logprobs(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Log-probabilities of the sampling distribution over the last axis (``-inf`` outside the nucleus)."""
    logits = logits.float()
    if temperature > 0:
        logits = logits / temperature
    logprobs = torch.log_softmax(logits, dim=-1)
    if temperature == 0 or top_p >= 1.0:
        return logprobs
    sorted_logprobs, order = torch.sort(logprobs, dim=-1, descending=True)
    mass_before = torch.cumsum(sorted_logprobs.exp(), dim=-1) - sorted_logprobs.exp()
    drop_sorted = mass_before >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return torch.log_softmax(logprobs.masked_fill(drop, float("-inf")), dim=-1)


def sample_token(logprobs: torch.Tensor, temperature: float, generator: torch.Generator | None) -> int:
    """Draw one token from a 1-D row of :func:`sampling_logprobs` with the request's own generator
    (Gumbel-max, so a row's draw depends only on its own generator and values)."""
    if temperature == 0:
        return int(torch.argmax(logprobs))
    uniform = torch.rand(logprobs.shape, generator=generator, dtype=torch.float32, device=logprobs.device)
    gumbel = -torch.log(-torch.log(uniform.clamp_(min=1e-20, max=1.0 - 1e-7)))
    return int(torch.argmax(logprobs + gumbel))


def token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """The logprob of each of ``token_ids`` under the sampling distribution of ``logits`` (``[..., V]``);
    what the trainer compares with the behaviour logprobs."""
    return sampling_logprobs(logits, temperature, top_p).gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
