"""Automatic prefix caching: the cache's own rules (longest prefix, LRU bound, redundant entries), the
batched prefill that starts from cached KV, and the torch engine giving the same tokens and logprobs
with and without cache hits, including after a weight update."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym.inference import GenerationRequest, GenerationResult, SamplingParams
from agentgym.inference.torch._batch import KVBatch
from agentgym.inference.torch._prefix_cache import PrefixCache
from agentgym.inference.torch.engine import TorchEngine


def prompt(length: int, start: int = 40) -> list[int]:
    return [start + (7 * i) % 300 for i in range(length)]


def kv(ids: list[int], layers: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Fake KV whose values are the token ids, so a slice shows which tokens it holds."""
    column = torch.tensor(ids, dtype=torch.float32)[None, None, :, None].expand(1, 2, len(ids), 3)
    return [(column + layer, -column - layer) for layer in range(layers)]


def held(prefix) -> list[int]:
    return prefix.layers[0][0][0, 0, :, 0].long().tolist()


# ---- the cache ------------------------------------------------------------------------------------


def test_lookup_finds_the_longest_cached_prefix_within_the_limit():
    cache = PrefixCache(1000, block=4)
    first, second = prompt(10), prompt(30, start=1)
    cache.insert(first, kv(first))
    cache.insert(second, kv(second))
    hit = cache.lookup(second + [5, 6], limit=31)
    assert hit.length == 30 and held(hit) == second
    assert cache.lookup(second, limit=29).length == 29  # never the whole prompt
    partial = cache.lookup(second[:13] + [999] * 8, limit=20)  # shares 13 tokens with an entry
    assert partial.length == 13 and held(partial) == second[:13]
    assert cache.lookup([999] * 20, limit=19) is None
    assert cache.lookup(second[:3] + [999] * 5, limit=7) is None  # under one block


def test_entries_are_copies_and_lookups_are_views_that_stay_valid():
    cache = PrefixCache(1000, block=4)
    ids = prompt(12)
    layers = kv(ids)
    cache.insert(ids, [(k.clone(), v.clone()) for k, v in layers])
    hit = cache.lookup(ids + [1], limit=12)
    cache.clear()
    assert len(cache) == 0 and cache.tokens == 0 and cache.lookup(ids + [1], limit=12) is None
    for (keys, values), (k, v) in zip(hit.layers, layers, strict=True):
        assert torch.equal(keys, k) and torch.equal(values, v)


def test_a_longer_entry_replaces_the_prefixes_it_contains():
    cache = PrefixCache(1000, block=4)
    turn1 = prompt(9)
    turn2 = turn1 + prompt(7, start=3)
    cache.insert(turn1, kv(turn1))
    cache.insert(turn2, kv(turn2))
    assert len(cache) == 1 and cache.tokens == len(turn2)
    cache.insert(turn2[:12], kv(turn2[:12]))  # already held by the longer entry
    cache.insert(turn1[:3], kv(turn1[:3]))  # under one block: not kept
    assert len(cache) == 1 and cache.tokens == len(turn2)


def test_least_recently_used_entries_are_evicted_past_the_capacity():
    cache = PrefixCache(50, block=4)
    a, b, c = prompt(20, start=0), prompt(20, start=1), prompt(20, start=2)
    cache.insert(a, kv(a))
    cache.insert(b, kv(b))
    assert cache.lookup(a + [1], limit=20).length == 20  # a is now the most recently used
    cache.insert(c, kv(c))
    assert cache.tokens == 40 <= cache.capacity and len(cache) == 2
    assert cache.lookup(b + [1], limit=20) is None
    assert cache.lookup(a + [1], limit=20) is not None and cache.lookup(c + [1], limit=20) is not None
    cache.insert(prompt(51, start=3), kv(prompt(51, start=3)))  # larger than the whole cache
    assert cache.tokens == 40
    for size in range(16, 40):
        ids = prompt(size, start=size)
        cache.insert(ids, kv(ids))
        assert cache.tokens <= 50
    with pytest.raises(ValueError, match="prefix_cache_tokens"):
        PrefixCache(-1)


# ---- the batched prefill from cached KV -----------------------------------------------------------


def test_prefill_from_cached_prefixes_equals_a_full_prefill(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    cpu = torch.device("cpu")
    contexts = [prompt(40), prompt(23, start=5), prompt(31, start=9), prompt(18, start=2)]
    cache = PrefixCache(10_000)
    with torch.inference_mode():
        for ids in (contexts[0][:35], contexts[1][:20], contexts[3][:17]):  # long and short suffixes
            batch, _ = KVBatch.prefill(model, [ids], cpu)
            cache.insert(ids, batch.row_kv(0, len(ids)))
        cached = [cache.lookup(ids, len(ids) - 1) for ids in contexts]
        assert [p.length if p else 0 for p in cached] == [35, 20, 0, 17]
        reused, logits = KVBatch.prefill(model, contexts, cpu, cached)
        full, expected = KVBatch.prefill(model, contexts, cpu)
        torch.testing.assert_close(logits, expected, atol=1e-4, rtol=1e-4)
        assert reused.mask.shape == full.mask.shape == (4, 40)  # no gaps left between prefix and rest
        assert torch.equal(reused.mask, full.mask) and torch.equal(reused.next_pos, full.next_pos)
        tokens = torch.tensor([3, 4, 5, 6])
        torch.testing.assert_close(
            reused.decode(model, tokens), full.decode(model, tokens), atol=1e-4, rtol=1e-4
        )


# ---- the engine -----------------------------------------------------------------------------------


def request(ids: list[int], seed: int, max_tokens: int = 16) -> GenerationRequest:
    sampling = SamplingParams(temperature=1.0, top_p=0.95, max_tokens=max_tokens, seed=seed)
    return GenerationRequest(prompt_ids=ids, sampling=sampling)


async def serve(engine: TorchEngine, requests: list[GenerationRequest]) -> list[GenerationResult]:
    return list(await asyncio.gather(*(engine.generate(r) for r in requests)))


def assert_same(results: list[GenerationResult], references: list[GenerationResult]) -> None:
    for result, reference in zip(results, references, strict=True):
        assert result.token_ids == reference.token_ids
        torch.testing.assert_close(
            torch.tensor(result.logprobs), torch.tensor(reference.logprobs), atol=1e-4, rtol=0
        )


@pytest.fixture(scope="module")
def engines(tiny_model_dir):
    cached = TorchEngine(tiny_model_dir, device="cpu", max_model_len=512)
    plain = TorchEngine(tiny_model_dir, device="cpu", max_model_len=512, prefix_cache_tokens=0)
    yield cached, plain
    asyncio.run(cached.close())
    asyncio.run(plain.close())


def test_multi_turn_requests_hit_and_match_an_uncached_engine(engines):
    cached, plain = engines
    ids = prompt(30)

    async def episode(engine: TorchEngine) -> tuple[list[GenerationResult], int]:
        engine.reset_stats()
        history, results = list(ids), []
        for turn in range(3):
            result = await engine.generate(request(history, seed=turn))
            results.append(result)
            history = history + result.token_ids + prompt(5 + turn, start=200 + turn)  # the observation
        return results, engine.stats().cached_prompt_tokens

    results, hits = asyncio.run(episode(cached))
    references, misses = asyncio.run(episode(plain))
    assert_same(results, references)
    assert misses == 0
    assert hits == sum(r.prompt_tokens + len(r.token_ids) - 1 for r in results[:2])


def test_a_batch_of_16_mixed_hits_and_misses_matches_an_uncached_engine(engines):
    cached, plain = engines
    firsts = [prompt(20 + 9 * i, start=60 + i) for i in range(8)]
    turn1 = asyncio.run(serve(cached, [request(ids, seed=i) for i, ids in enumerate(firsts)]))
    hits = [
        ids + result.token_ids + prompt(1 + 5 * i, start=250)  # different cached and new lengths
        for i, (ids, result) in enumerate(zip(firsts, turn1, strict=True))
    ]
    misses = [prompt(8 + 11 * i, start=90 + i) for i in range(7)]
    branch = firsts[3][:21] + prompt(12, start=7)  # shares 21 tokens with a cached episode
    batch = [
        request(ids, seed=100 + i, max_tokens=4 + 3 * i) for i, ids in enumerate([*hits, *misses, branch])
    ]
    batch = [batch[i] for i in (0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15)]

    cached.reset_stats()
    results = asyncio.run(serve(cached, batch))
    entries = [r.prompt_tokens + len(r.token_ids) - 1 for r in turn1]  # all but the last sampled token
    assert cached.stats().cached_prompt_tokens == sum(entries) + 21
    assert_same(results, asyncio.run(serve(plain, batch)))


def test_branches_of_one_history_all_hit(engines):
    cached, _ = engines
    ids = prompt(40, start=11)
    first = asyncio.run(cached.generate(request(ids, seed=1)))
    history = ids + first.token_ids
    cached.reset_stats()
    asyncio.run(serve(cached, [request(history + [7 + i], seed=i) for i in range(4)]))
    assert cached.stats().cached_prompt_tokens == 4 * (len(history) - 1)


def test_a_weight_update_empties_the_cache(tiny_model_dir, tmp_path):
    new_model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for param in new_model.parameters():
            param.add_(torch.randn(param.shape, generator=torch.Generator().manual_seed(1)) * 0.05)
    new_model.save_pretrained(tmp_path / "new")
    new_state = {k: v.clone() for k, v in new_model.state_dict().items()}
    ids = prompt(30)

    async def updated() -> tuple[GenerationResult, GenerationResult, int]:
        engine = TorchEngine(tiny_model_dir, device="cpu")
        try:
            first = await engine.generate(request(ids, seed=0))
            await engine.update_weights(new_state)
            engine.reset_stats()
            second = await engine.generate(request(ids + first.token_ids + [9, 8], seed=1))
            return first, second, engine.stats().cached_prompt_tokens
        finally:
            await engine.close()

    first, second, reused = asyncio.run(updated())
    assert reused == 0

    async def fresh() -> GenerationResult:
        engine = TorchEngine(tmp_path / "new", tokenizer=tiny_model_dir, device="cpu", prefix_cache_tokens=0)
        try:
            return await engine.generate(request(ids + first.token_ids + [9, 8], seed=1))
        finally:
            await engine.close()

    assert_same([second], [asyncio.run(fresh())])
    assert second.versions == [1] * len(second.token_ids)


def test_the_engine_keeps_its_cache_within_bounds(tiny_model_dir):
    episodes = [prompt(40, start=s) for s in (1, 2, 3)]

    async def scenario() -> tuple[list[int], int]:
        engine = TorchEngine(tiny_model_dir, device="cpu", prefix_cache_tokens=100)
        try:
            firsts = [await engine.generate(request(ids, seed=0, max_tokens=8)) for ids in episodes]
            held = engine._prefix_cache.tokens
            reused = []
            for ids, first in zip(reversed(episodes), reversed(firsts), strict=True):  # newest first
                engine.reset_stats()
                await engine.generate(request(ids + first.token_ids + [5], seed=1, max_tokens=2))
                reused.append(engine.stats().cached_prompt_tokens)
            return reused, held
        finally:
            await engine.close()

    reused, held = asyncio.run(scenario())
    assert held <= 100
    assert reused[0] > 40 and reused[1] > 40 and reused[2] == 0  # the oldest episode was evicted
    with pytest.raises(ValueError, match="prefix_cache_tokens"):
        TorchEngine(tiny_model_dir, device="cpu", prefix_cache_tokens=-5)


@pytest.mark.gpu
def test_cuda_multi_turn_hits_match_an_uncached_engine(tiny_model_dir):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

    async def episode(prefix_cache_tokens: int) -> list[GenerationResult]:
        engine = TorchEngine(
            tiny_model_dir, device="cuda", dtype="float32", prefix_cache_tokens=prefix_cache_tokens
        )
        try:
            history, results = prompt(30), []
            for turn in range(3):
                results += await serve(
                    engine, [request(history, seed=turn), request(prompt(20 + turn), seed=9)]
                )
                history = history + results[-2].token_ids + prompt(4, start=200 + turn)
            return results
        finally:
            await engine.close()

    results, references = asyncio.run(episode(262_144)), asyncio.run(episode(0))
    for result, reference in zip(results, references, strict=True):
        assert result.token_ids == reference.token_ids
        torch.testing.assert_close(
            torch.tensor(result.logprobs), torch.tensor(reference.logprobs), atol=1e-3, rtol=1e-3
        )
