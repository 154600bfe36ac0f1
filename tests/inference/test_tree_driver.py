"""The tree driver: its nucleus test from the top-k alone (never a candidate outside the sampling nucleus, and exact
at temperature 1), and whole trees grown on a deterministic bigram source in the default suite (the vLLM trees
themselves are in ``test_vllm_tree.py``)."""

from __future__ import annotations

import asyncio

import pytest
import torch

from agentgym.inference._tree_driver import GreedyChunk, grow_tree, nucleus_size
from agentgym.inference.sampling import sampling_logprobs
from agentgym.inference.tree import LatrParams
from agentgym.inference.types import GenerationRequest, GenerationResult, SamplingParams, TreeResult

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


# -- the whole driver on a deterministic source, without vLLM ------------------------------------------------

class BigramSource:
    """A :class:`GreedySource` over a fixed bigram model of ``VOCAB`` tokens (each token's next-token logits a seeded
    row; token 0 is the end of turn, and unlikely): greedy chunks with their untempered top-k, sampled requests
    with their seed, and a version that moves after ``update_after`` chunks."""

    def __init__(self, seed: int = 3, update_after: int | None = None, abort: bool = False) -> None:
        logits = torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(seed)) * 2.5
        logits[:, 0] = -8.0
        self.logprobs = torch.log_softmax(logits, -1)
        self.version, self.chunks, self.update_after, self.abort = 0, 0, update_after, abort

    def next_logprobs(self, context: list[int]) -> torch.Tensor:
        return self.logprobs[context[-1]]

    async def greedy_chunk(self, request: GenerationRequest, top_k: int) -> GreedyChunk:
        assert request.sampling.temperature == 0
        context, tokens, logprobs, tops = list(request.prompt_ids), [], [], []
        for _ in range(request.sampling.max_tokens):
            values, ids = self.next_logprobs(context).topk(top_k)
            tokens.append(int(ids[0]))
            logprobs.append(float(values[0]))
            tops.append((ids.tolist(), values.tolist()))
            context.append(tokens[-1])
            if tokens[-1] == 0:
                break
        version = self.version
        self.chunks += 1
        if self.update_after is not None and self.chunks >= self.update_after:
            self.version += 1
        finish = "abort" if self.abort else "stop" if tokens[-1] == 0 else "length"
        result = GenerationResult(request_id="chunk", token_ids=tokens, logprobs=logprobs,
                                  versions=[version] * len(tokens), finish_reason=finish,
                                  prompt_tokens=len(request.prompt_ids))
        return GreedyChunk(result=result, tops=tops, cached_tokens=0)

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        generator = torch.Generator().manual_seed(request.sampling.seed or 0)
        context, tokens, logprobs = list(request.prompt_ids), [], []
        for _ in range(request.sampling.max_tokens):
            row = self.next_logprobs(context)
            token = int(torch.multinomial(row.exp(), 1, generator=generator))
            tokens.append(token)
            logprobs.append(float(row[token]))
            context.append(token)
            if token == 0:
                break
        return GenerationResult(request_id=request.request_id, token_ids=tokens, logprobs=logprobs,
                                versions=[self.version] * len(tokens),
                                finish_reason="stop" if tokens and tokens[-1] == 0 else "length",
                                prompt_tokens=len(request.prompt_ids))


FORKING = LatrParams(tau_abs=0.1, tau_rel=0.9, prune_threshold=None, lookahead=(4,), forced_exit=24)
"""Settings under which the bigram model forks often and nothing is pruned."""
PROMPT = [5, 9, 2]


def _grow(source: BigramSource, width: int, params: LatrParams = FORKING, max_tokens: int = 40) -> TreeResult:
    request = GenerationRequest(prompt_ids=PROMPT, sampling=SamplingParams(temperature=1.0, max_tokens=max_tokens,
                                                                          seed=11))
    return asyncio.run(grow_tree(source, request, params, width, eos_ids={0}, vocab_size=VOCAB))


@pytest.mark.parametrize("width", [1, 3, 6])
def test_a_tree_grows_greedy_branches_that_fork_on_top_k_candidates_then_sample_on(width):
    source = BigramSource()
    tree = _grow(source, width)
    assert 1 <= len(tree.branches) <= width and tree.branches[0].branch == 0 and tree.branches[0].parent is None
    assert tree.made >= len(tree.branches) - 1 and tree.pruned == 0
    if width > 1:
        assert len(tree.branches) > 1  # the bigram model is unsure often enough under FORKING
    by_id = {b.branch: b for b in tree.branches}
    for branch in tree.branches:
        result = branch.result
        tree_tokens = sum(result.tree_chosen)
        assert result.tree_chosen == [True] * tree_tokens + [False] * (len(result.token_ids) - tree_tokens)
        assert 0 < tree_tokens <= FORKING.forced_exit and len(result.token_ids) <= 40
        forks, ancestor = set(), branch  # where it or an ancestor took a candidate other than the top token
        while ancestor.parent is not None:
            forks.add(ancestor.fork_at)
            ancestor = by_id[ancestor.parent]
        context = list(PROMPT)
        for position, token in enumerate(result.token_ids[:tree_tokens]):
            row = source.next_logprobs(context)
            if position in forks:
                assert token in row.topk(FORKING.top_k).indices.tolist() and token != int(row.argmax())
            else:
                assert token == int(row.argmax())  # greedy everywhere else in the tree phase
            assert result.logprobs[position] == pytest.approx(float(row[token]), abs=1e-6)
            context.append(token)
        if branch.parent in by_id:  # a child repeats its parent's tokens before its own
            parent = by_id[branch.parent].result.token_ids
            assert result.token_ids[:branch.fork_at] == parent[:branch.fork_at]
        assert set(result.versions) == {0}
    root = tree.branches[0].result
    grown = root.token_ids[:sum(root.tree_chosen)]
    if len(grown) < 40 and grown[-1] != 0:  # the root sampled on from its tree tokens with the request's own seed
        rest = asyncio.run(source.generate(GenerationRequest(
            prompt_ids=PROMPT + grown, sampling=SamplingParams(temperature=1.0, max_tokens=40 - len(grown), seed=11))))
        assert root.token_ids == grown + rest.token_ids
    # nothing pruned: the tree decoded each branch's own tokens, from its fork on, once
    assert tree.tree_tokens == sum(sum(b.result.tree_chosen) - b.fork_at for b in tree.branches)


def test_a_weight_update_during_the_read_ahead_ends_the_tree_before_any_tree_token():
    source = BigramSource(update_after=1)
    tree = _grow(source, 4)
    assert [b.branch for b in tree.branches] == [0] and tree.made == 0
    assert not any(tree.branches[0].result.tree_chosen)  # every token sampled, under the new weights
    assert set(tree.branches[0].result.versions) == {1}


def test_an_engine_that_aborts_ends_every_branch_with_abort():
    tree = _grow(BigramSource(abort=True), 4)
    assert tree.branches and all(b.result.finish_reason == "abort" for b in tree.branches)
