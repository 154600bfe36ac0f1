"""The sampling distribution, written once for the engine that samples and the trainer that scores.

A token is drawn from ``softmax(logits / temperature)`` restricted to the top-p nucleus and
renormalised. Its *behaviour logprob* is its log-probability under exactly that distribution; the
trainer calls :func:`sampling_logprobs` with the same settings to get the matching number under the
learner's weights. With ``temperature == 0`` the token is the argmax and its logprob is taken under
``softmax(logits)`` (temperature 1, no nucleus), since a point mass has nothing to correct.
"""

from __future__ import annotations

import torch

_FIRST_CANDIDATES = 32
"""How many of a row's largest tokens the nucleus search looks at first."""
_FULL_SORT_FRACTION = 8
"""Past ``vocab / _FULL_SORT_FRACTION`` candidates the nucleus search sorts the whole row instead."""


def sampling_logprobs(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Log-probabilities of the sampling distribution over the last axis (``-inf`` outside the nucleus)."""
    logits = logits.float()
    if temperature > 0:
        logits = logits / temperature
    logprobs = torch.log_softmax(logits, dim=-1)
    if temperature == 0 or top_p >= 1.0:
        return logprobs
    return torch.log_softmax(logprobs.masked_fill(~_nucleus(logprobs, top_p), float("-inf")), dim=-1)


def _nucleus(logprobs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Which tokens the nucleus keeps: in descending order, those whose probability mass before them is
    under ``top_p``. That mass only grows along the order, so once a row's ``k``-th largest token is out,
    its top ``k`` (``torch.topk``) decide; the rows whose nucleus is larger try again with a ``k`` sized by
    the mass still missing, up to a full sort. The values and their order are those a full sort gives."""
    vocab = logprobs.shape[-1]
    flat = logprobs.reshape(-1, vocab)
    keep = torch.zeros_like(flat, dtype=torch.bool)
    rows = torch.arange(flat.shape[0], device=flat.device)
    k = min(_FIRST_CANDIDATES, vocab)
    while rows.numel():
        top, order = torch.topk(flat.index_select(0, rows), k, dim=-1)  # sorted, largest first
        probs = top.exp()
        mass = torch.cumsum(probs, dim=-1)
        kept = mass - probs < top_p
        decided = ~kept[:, -1] if k < vocab else torch.ones_like(kept[:, -1])
        keep[rows[decided]] = keep.new_zeros((int(decided.sum()), vocab)).scatter_(
            -1, order[decided], kept[decided]
        )
        rows, pending = rows[~decided], ~decided
        if rows.numel():  # each token past the k-th is at most as likely: (top_p - mass) / p_k more
            missing = ((top_p - mass[pending, -1]) / probs[pending, -1]).nan_to_num(vocab).clamp(0, vocab)
            k = max(2 * k, 2 * (k + int(missing.max())))
            k = vocab if k * _FULL_SORT_FRACTION >= vocab else k  # a large top-k costs about a sort
    return keep.reshape(logprobs.shape)


def sample_token(logprobs: torch.Tensor, temperature: float, generator: torch.Generator | None) -> int:
    """Draw one token from a 1-D row of :func:`sampling_logprobs` with the request's own generator
    (Gumbel-max, so a row's draw depends only on its own generator and values)."""
    if temperature == 0:
        return int(torch.argmax(logprobs))
    uniform = torch.rand(logprobs.shape, generator=generator, dtype=torch.float32, device=logprobs.device)
    gumbel = -torch.log(-torch.log(uniform.clamp_(min=1e-20, max=1.0 - 1e-7)))
    return int(torch.argmax(logprobs + gumbel))


def token_logprobs(
    logits: torch.Tensor, token_ids: torch.Tensor, temperature: float, top_p: float
) -> torch.Tensor:
    """The logprob of each of ``token_ids`` under the sampling distribution of ``logits`` (``[..., V]``);
    what the trainer compares with the behaviour logprobs."""
    return sampling_logprobs(logits, temperature, top_p).gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
