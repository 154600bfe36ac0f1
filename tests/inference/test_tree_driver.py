"""The tree driver's nucleus test from the top-k alone: never a candidate outside the sampling nucleus, and exact
at temperature 1 (the vLLM trees themselves are in ``test_vllm_tree.py``)."""

from __future__ import annotations

import pytest
import torch

from agentgym.inference._tree_driver import nucleus_size
from agentgym.inference.sampling import sampling_logprobs

VOCAB = 64


@pytest.mark.parametrize("temperature", [0.3, 0.8, 1.0, 1.5, 3.0])
@pytest.mark.parametrize("k", [2, 4])
def test_the_candidates_it_allows_are_in_the_nucleus_and_at_temperature_1_all_of_them(temperature, k):
    generator = torch.Generator().manual_seed(k)
    for trial in range(200):
        logits = torch.randn(VOCAB, generator=generator) * (0.5 + trial / 40)
        top_p = float(torch.rand((), generator=generator)) * 0.9 + 0.05
        probs, ids = torch.softmax(logits, -1).topk(k)
        inside = int((sampling_logprobs(logits, temperature, top_p)[ids] > float("-inf")).sum())
        size = nucleus_size(probs.tolist(), temperature, top_p, VOCAB)
        assert 1 <= size <= inside
        if temperature == 1.0:
            assert size == inside


def test_greedy_or_a_whole_nucleus_allows_every_candidate():
    assert nucleus_size([0.9, 0.05], 0.0, 0.5, VOCAB) == 2
    assert nucleus_size([0.9, 0.05], 0.7, 1.0, VOCAB) == 2
    assert nucleus_size([0.9, 0.05], 1.0, 0.5, VOCAB) == 1
