"""Properties of the one sampling distribution that the engine samples from and the trainer scores."""

from __future__ import annotations

import math

import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentgym.inference.sampling import sample_token, sampling_logprobs, token_logprobs

logits_rows = st.lists(st.floats(-30, 30, allow_nan=False, width=32), min_size=2, max_size=64).map(
    lambda values: torch.tensor(values, dtype=torch.float32)
)
temperatures = st.one_of(st.just(0.0), st.floats(0.05, 4.0))
top_ps = st.one_of(st.just(1.0), st.floats(0.01, 1.0))
fast = settings(max_examples=200, deadline=None)


@fast
@given(logits_rows, temperatures, top_ps)
def test_logprobs_are_normalised(logits, temperature, top_p):
    logprobs = sampling_logprobs(logits, temperature, top_p)
    assert math.isclose(float(torch.logsumexp(logprobs, -1)), 0.0, abs_tol=1e-5)
    assert not torch.isnan(logprobs).any()


@fast
@given(logits_rows, st.floats(0.05, 4.0), st.floats(0.01, 1.0))
def test_nucleus_keeps_the_argmax_and_the_smallest_set_reaching_top_p(logits, temperature, top_p):
    kept = torch.isfinite(sampling_logprobs(logits, temperature, top_p))
    probs = torch.softmax(logits / temperature, -1)
    top = float(logits.max())
    assert float(logits[kept].max()) >= top - 1e-5 * (1 + abs(top))  # the argmax, up to rounding ties
    mass = float(probs[kept].sum())
    assert mass >= top_p - 1e-5
    assert mass - float(probs[kept].min()) < top_p + 1e-5  # dropping any kept token falls short


@fast
@given(logits_rows, st.floats(0.05, 4.0))
def test_top_p_one_is_the_tempered_softmax(logits, temperature):
    expected = torch.log_softmax(logits / temperature, -1)
    torch.testing.assert_close(sampling_logprobs(logits, temperature, 1.0), expected)


@fast
@given(logits_rows, temperatures, top_ps, st.integers(0, 2**32))
def test_sampled_tokens_have_finite_logprob(logits, temperature, top_p, seed):
    logprobs = sampling_logprobs(logits, temperature, top_p)
    token = sample_token(logprobs, temperature, torch.Generator().manual_seed(seed))
    assert 0 <= token < logits.shape[-1] and math.isfinite(float(logprobs[token]))
    assert float(token_logprobs(logits, torch.tensor(token), temperature, top_p)) == float(logprobs[token])


@fast
@given(logits_rows, top_ps)
def test_temperature_zero_is_the_argmax_scored_at_temperature_one(logits, top_p):
    logprobs = sampling_logprobs(logits, 0.0, top_p)
    token = sample_token(logprobs, 0.0, None)
    assert logprobs[token] == logprobs.max()
    top = float(logits.max())
    assert float(logits[token]) >= top - 1e-5 * (1 + abs(top))  # the argmax, up to rounding ties
    torch.testing.assert_close(logprobs, torch.log_softmax(logits, -1))


def test_a_seeded_generator_repeats_its_draws():
    logprobs = sampling_logprobs(torch.randn(50, generator=torch.Generator().manual_seed(1)), 1.0, 0.9)
    draws = [
        [sample_token(logprobs, 1.0, gen) for _ in range(20)]
        for gen in (torch.Generator().manual_seed(5), torch.Generator().manual_seed(5))
    ]
    assert draws[0] == draws[1] and len(set(draws[0])) > 1


def full_sort_nucleus(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """The nucleus as first written: one full sort of every row."""
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)
    sorted_logprobs, order = torch.sort(logprobs, dim=-1, descending=True)
    mass_before = torch.cumsum(sorted_logprobs.exp(), dim=-1) - sorted_logprobs.exp()
    drop = torch.zeros_like(mass_before, dtype=torch.bool).scatter(-1, order, mass_before >= top_p)
    return torch.log_softmax(logprobs.masked_fill(drop, float("-inf")), dim=-1)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32), st.floats(0.05, 8.0), st.floats(0.01, 0.999), st.sampled_from([7, 40, 300, 2048])
)
@example(seed=15819302, scale=0.05, top_p=0.05, vocab=2048)  # two tokens of equal probability at the edge
def test_nucleus_equals_a_full_sort(seed, scale, top_p, vocab):
    """Peaked rows (small nucleus) and flat ones (a nucleus past every candidate set) in one batch. Tokens of
    equal probability at the nucleus' edge may be kept either way round (a sort orders ties as it likes), so
    the nucleus is compared as what it holds: the same probabilities, before and after renormalising."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 3, vocab, generator=generator) * torch.tensor([scale, 1.0, 0.05])[:, None]
    mine, reference = sampling_logprobs(logits, 0.8, top_p), full_sort_nucleus(logits, 0.8, top_p)
    original = torch.log_softmax(logits / 0.8, dim=-1)

    def held(nucleus: torch.Tensor) -> torch.Tensor:
        return original.masked_fill(nucleus == float("-inf"), float("-inf")).sort(dim=-1).values

    torch.testing.assert_close(held(mine), held(reference), rtol=0, atol=0)
    torch.testing.assert_close(mine.sort(dim=-1).values, reference.sort(dim=-1).values, rtol=0, atol=0)
