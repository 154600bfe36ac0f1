"""The torch engine against references: a full re-forward for logprobs, HF ``generate`` for greedy,
the same request alone for batching, and a fresh engine for continuation after a weight update."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from agentgym.inference import GenerationRequest, InferenceEngine, SamplingParams, load_engine
from agentgym.inference.sampling import token_logprobs
from agentgym.inference.torch._batch import KVBatch
from agentgym.inference.torch.engine import TorchEngine
from tests.waiting import until_async


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    engine = TorchEngine(tiny_model_dir, device="cpu", max_model_len=256)
    yield engine
    asyncio.run(engine.close())


def prompt(length: int, start: int = 40) -> list[int]:
    return [start + (7 * i) % 300 for i in range(length)]


def request(ids: list[int], **sampling) -> GenerationRequest:
    return GenerationRequest(prompt_ids=ids, sampling=SamplingParams(**sampling))


async def generated(engine: TorchEngine, count: int) -> None:
    """Wait until the engine has generated at least ``count`` tokens since its last reset."""
    await until_async(lambda: engine.stats().generated_tokens >= count, f"{count} tokens generated", every=0.001)


def engine_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "agentgym-torch-engine"]


def test_is_an_inference_engine(engine):
    assert isinstance(engine, InferenceEngine)
    assert engine.name == "torch" and engine.version == 0
    assert engine.tokenizer.convert_tokens_to_ids("<|im_end|>") in engine.eos_token_ids
    assert isinstance(engine.model, torch.nn.Module)


def test_local_paths_only(tmp_path):
    with pytest.raises(FileNotFoundError, match="local"):
        TorchEngine(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="local"):
        load_engine("torch", model="Qwen/Qwen2-0.5B")


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9), (1.5, 0.5), (0.0, 1.0)])
def test_logprobs_match_a_full_forward(engine, temperature, top_p):
    ids = prompt(9)
    result = asyncio.run(
        engine.generate(request(ids, temperature=temperature, top_p=top_p, max_tokens=24, seed=3))
    )
    full = torch.tensor([ids + result.token_ids])
    with torch.inference_mode():
        logits = engine.model(full).logits[0, len(ids) - 1 : -1]
    expected = token_logprobs(logits, torch.tensor(result.token_ids), temperature, top_p)
    assert torch.isfinite(expected).all()
    clear = ~_nucleus_edge_is_a_tie(logits, temperature, top_p)
    assert clear.sum() >= len(result.token_ids) - 2  # a tie is rare: excuse no more than two
    torch.testing.assert_close(torch.tensor(result.logprobs)[clear], expected[clear], atol=1e-4, rtol=1e-4)
    assert result.versions == [0] * len(result.token_ids)
    assert result.prompt_tokens == len(ids)


def _nucleus_edge_is_a_tie(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Positions whose top-p nucleus is decided by float noise: a cumulative probability within 1e-5 of
    ``top_p``, where a cached decode and a full forward may keep different sets (the tiny model's near-uniform
    tokens make such ties; one lands at seed 3, temperature 1.5, top-p 0.5)."""
    if temperature == 0.0 or top_p >= 1.0:
        return torch.zeros(logits.shape[0], dtype=torch.bool)
    cumulative = torch.softmax(logits / temperature, dim=-1).sort(dim=-1, descending=True).values.cumsum(dim=-1)
    return ((cumulative - top_p).abs() < 1e-5).any(dim=-1)


def test_greedy_equals_hf_generate(engine):
    ids = prompt(12, start=90)
    result = asyncio.run(engine.generate(request(ids, temperature=0.0, max_tokens=30)))
    with torch.inference_mode():
        reference = engine.model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=False,
            max_new_tokens=30,
            eos_token_id=sorted(engine.eos_token_ids),
            pad_token_id=0,
        )[0, len(ids) :].tolist()
    assert result.token_ids == reference


def test_seeded_request_is_the_same_alone_and_in_a_batch_of_16(engine):
    target = request(prompt(10), temperature=1.0, top_p=0.95, max_tokens=40, seed=1234)
    alone = asyncio.run(engine.generate(target))

    async def batched():
        others = [
            asyncio.create_task(
                engine.generate(
                    request(prompt(3 + 5 * i, start=i), temperature=0.5 + i / 16, max_tokens=5 + 4 * i)
                )
            )
            for i in range(8)
        ]
        await generated(engine, 1)
        main = asyncio.create_task(engine.generate(target))
        await asyncio.sleep(0.02)  # the rest join while the target is already decoding
        others += [
            asyncio.create_task(
                engine.generate(request(prompt(40 - 3 * i, start=2 * i), max_tokens=3 + 7 * i))
            )
            for i in range(8)
        ]
        results = await asyncio.gather(main, *others)
        return results[0]

    engine.reset_stats()
    together = asyncio.run(batched())
    assert together.token_ids == alone.token_ids
    torch.testing.assert_close(
        torch.tensor(together.logprobs), torch.tensor(alone.logprobs), atol=1e-4, rtol=0
    )
    assert engine.stats().requests == 17


def test_max_tokens_stop_strings_and_end_of_turn(engine):
    ids = prompt(8, start=5)
    free = asyncio.run(engine.generate(request(ids, temperature=0.0, max_tokens=20)))
    assert free.finish_reason == "length" and len(free.token_ids) == 20

    tokenizer = engine.tokenizer
    text = tokenizer.decode(free.token_ids)
    cut = next(k for k in range(4, 20) if tokenizer.decode(free.token_ids[:k]).strip())
    stop = tokenizer.decode(free.token_ids[:cut])[-2:]
    first = next(k for k in range(1, 21) if stop in tokenizer.decode(free.token_ids[:k]))
    assert stop in text
    stopped = asyncio.run(
        engine.generate(request(ids, temperature=0.0, max_tokens=20, stop=("never here", stop)))
    )
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[:first]

    end_of_turn = free.token_ids[6]
    first_end = free.token_ids.index(end_of_turn) + 1
    saved = engine.eos_token_ids
    engine.eos_token_ids = frozenset({end_of_turn})
    try:
        ended = asyncio.run(engine.generate(request(ids, temperature=0.0, max_tokens=20)))
    finally:
        engine.eos_token_ids = saved
    assert ended.finish_reason == "stop"
    assert ended.token_ids == free.token_ids[:first_end] and ended.token_ids[-1] == end_of_turn


def test_max_model_len(engine):
    with pytest.raises(ValueError, match="max_model_len=256"):
        asyncio.run(engine.generate(request(prompt(256))))
    with pytest.raises(ValueError, match="vocabulary"):
        asyncio.run(engine.generate(request([10**7])))
    result = asyncio.run(engine.generate(request(prompt(250), temperature=0.0, max_tokens=50)))
    assert len(result.token_ids) <= 6
    if result.token_ids[-1] not in engine.eos_token_ids:
        assert len(result.token_ids) == 6 and result.finish_reason == "length"


def test_generation_gives_no_future_warning(engine):
    """Newer ``transformers`` deprecate the ``past_key_values`` keyword for ``cache`` with a FutureWarning at
    every forward; the second request decodes after the first's cached prefix."""
    ids = prompt(24, start=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # raised on the engine's thread, it fails the request
        for _ in range(2):
            result = asyncio.run(engine.generate(request(ids, temperature=0.0, max_tokens=4)))
            assert result.token_ids


def test_cancellation_frees_the_slot(tiny_model_dir):
    async def scenario():
        engine = TorchEngine(tiny_model_dir, device="cpu", max_batch_size=1)
        engine.eos_token_ids = frozenset()
        try:
            long = asyncio.create_task(engine.generate(request(prompt(5), max_tokens=4000)))
            await generated(engine, 3)
            waiting = asyncio.create_task(engine.generate(request(prompt(6), max_tokens=8)))
            await asyncio.sleep(0.05)
            assert not waiting.done()  # the only slot is taken
            long.cancel()
            result = await asyncio.wait_for(waiting, timeout=60)
            assert len(result.token_ids) == 8
            with pytest.raises(asyncio.CancelledError):
                await long
            return engine.stats()
        finally:
            await engine.close()

    stats = asyncio.run(scenario())
    assert stats.generated_tokens < 4000, "the cancelled request ran to its end"


def test_a_failing_step_fails_only_its_requests(tiny_model_dir, monkeypatch):
    engine = TorchEngine(tiny_model_dir, device="cpu")
    forward = engine.model.forward
    calls = {"n": 0, "fail_at": 1}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == calls["fail_at"]:
            raise RuntimeError("device lost")
        return forward(*args, **kwargs)

    monkeypatch.setattr(engine.model, "forward", flaky)

    async def scenario():
        try:
            first = await asyncio.gather(
                *(engine.generate(request(prompt(4 + i), max_tokens=6)) for i in range(3)),
                return_exceptions=True,
            )
            calls["n"], calls["fail_at"] = 0, 3  # now a decode step fails
            second = await asyncio.gather(
                *(engine.generate(request(prompt(4 + i), max_tokens=6)) for i in range(3)),
                return_exceptions=True,
            )
            after = await engine.generate(request(prompt(7), max_tokens=6))
            return first, second, after
        finally:
            await engine.close()

    first, second, after = asyncio.run(scenario())
    for results in (first, second):
        errors = [r for r in results if isinstance(r, Exception)]
        assert errors and all(isinstance(e, RuntimeError) and "device lost" in str(e) for e in errors)
        assert all(len(r.token_ids) == 6 for r in results if not isinstance(r, Exception))
    assert len(after.token_ids) == 6


def test_a_worker_that_breaks_fails_every_waiting_and_later_call_instead_of_hanging(tiny_model_dir, monkeypatch):
    """An error outside a model pass (here in admitting requests to the batch) stops the worker: the requests
    waiting fail with it, and so does every later call, naming it, rather than waiting for ever."""
    engine = TorchEngine(tiny_model_dir, device="cpu")

    def broken() -> None:
        raise AssertionError("a cache layer without keys")

    monkeypatch.setattr(engine, "_admit", broken)

    async def scenario():
        try:
            waiting = await asyncio.wait_for(asyncio.gather(
                *(engine.generate(request(prompt(4 + i), max_tokens=6)) for i in range(3)), return_exceptions=True),
                timeout=30)
            with pytest.raises(RuntimeError, match="worker failed: AssertionError: a cache layer without keys"):
                await engine.generate(request(prompt(7), max_tokens=6))
            with pytest.raises(RuntimeError, match="worker failed"):
                await engine.update_weights(engine.model.state_dict())
            return waiting
        finally:
            await engine.close()

    waiting = asyncio.run(scenario())
    assert all(isinstance(r, RuntimeError) and "a cache layer without keys" in str(r) for r in waiting), waiting


def test_update_weights_mid_generation_continues_under_new_weights(tiny_model_dir, tmp_path):
    new_model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for param in new_model.parameters():
            param.add_(torch.randn(param.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    new_state = {k: v.clone() for k, v in new_model.state_dict().items()}
    new_model.save_pretrained(tmp_path / "new")
    ids = prompt(6)

    async def interrupted():
        engine = TorchEngine(tiny_model_dir, device="cpu")
        engine.eos_token_ids = frozenset()
        try:
            task = asyncio.create_task(engine.generate(request(ids, temperature=0.0, max_tokens=200)))
            await generated(engine, 5)
            assert await engine.update_weights(new_state) == 1
            result = await task
            with pytest.raises(ValueError, match="missing"):
                await engine.update_weights({"lm_head.weight": new_state["lm_head.weight"]})
            assert await engine.update_weights(tmp_path / "new", version=7) == 7
            return result, engine.stats(), engine.version
        finally:
            await engine.close()

    result, stats, version = asyncio.run(interrupted())
    switch = result.versions.index(1)
    assert 0 < switch < len(result.token_ids) == 200
    assert result.versions == [0] * switch + [1] * (200 - switch)
    assert stats.weight_updates == 2 and stats.interrupted == 1 and version == 7

    async def fresh():
        engine = TorchEngine(tmp_path / "new", tokenizer=tiny_model_dir, device="cpu")
        engine.eos_token_ids = frozenset()
        try:
            prefix = result.token_ids[:switch]
            return await engine.generate(request(ids + prefix, temperature=0.0, max_tokens=200 - switch))
        finally:
            await engine.close()

    assert asyncio.run(fresh()).token_ids == result.token_ids[switch:]


def test_close_aborts_in_flight_and_is_idempotent(tiny_model_dir):
    async def scenario():
        engine = TorchEngine(tiny_model_dir, device="cpu")
        engine.eos_token_ids = frozenset()
        task = asyncio.create_task(engine.generate(request(prompt(5), max_tokens=5000)))
        await generated(engine, 2)
        await engine.close()
        result = await asyncio.wait_for(task, timeout=60)
        await engine.close()
        with pytest.raises(RuntimeError, match="closed"):
            await engine.generate(request(prompt(5)))
        return result

    before = len(engine_threads())
    result = asyncio.run(scenario())
    assert result.finish_reason == "abort" and len(result.token_ids) >= 2
    assert len(engine_threads()) == before


def test_leaving_rows_release_their_cache_and_padding(engine):
    with torch.inference_mode():
        batch, _ = KVBatch.prefill(engine.model, [prompt(3), prompt(9)], engine.device)
        joining, _ = KVBatch.prefill(engine.model, [prompt(5)], engine.device)
        batch.merge(joining)
        assert batch.mask.sum(1).tolist() == [3, 9, 5] and batch.mask.shape == (3, 9)
        batch.decode(engine.model, torch.tensor([1, 2, 3]))
        kept = batch.select([2, 0])
    assert kept.mask.shape == (2, 6) and kept.next_pos.tolist() == [6, 4]
    assert all(layer.keys.shape[::2] == (2, 6) for layer in kept.cache.layers)
    assert batch.select([]) is None


def test_many_concurrent_requests_finish(tiny_model_dir):
    async def scenario():
        engine = TorchEngine(tiny_model_dir, device="cpu", max_batch_size=16)
        try:
            results = await asyncio.gather(
                *(
                    engine.generate(
                        request(
                            prompt(4 + i % 23, start=i),
                            temperature=(i % 4) / 3,
                            top_p=0.8 + (i % 3) / 15,
                            max_tokens=4 + i % 13,
                        )
                    )
                    for i in range(64)
                )
            )
            return results, engine.stats()
        finally:
            await engine.close()

    results, stats = asyncio.run(scenario())
    assert [len(r.token_ids) <= 4 + i % 13 for i, r in enumerate(results)] == [True] * 64
    assert all(r.finish_reason in ("stop", "length") for r in results)
    assert stats.requests == 64 and stats.generated_tokens == sum(len(r.token_ids) for r in results)
    assert 0 < stats.busy_seconds <= stats.wall_seconds


def test_serves_a_model_object_it_is_given(engine):
    ids = prompt(12, start=90)

    async def scenario():
        shared = TorchEngine(engine.model, tokenizer=engine.tokenizer, device="cpu")
        try:
            assert shared.model is engine.model
            mine = await shared.generate(request(ids, temperature=0.0, max_tokens=10))
            theirs = await engine.generate(request(ids, temperature=0.0, max_tokens=10))
            return mine.token_ids, theirs.token_ids
        finally:
            await shared.close()

    mine, theirs = asyncio.run(scenario())
    assert mine == theirs
    unsaved = AutoModelForCausalLM.from_config(
        Qwen2Config(hidden_size=64, num_hidden_layers=1, intermediate_size=64)
    )
    with pytest.raises(ValueError, match="tokenizer="):
        TorchEngine(unsaved)


@pytest.mark.gpu
def test_cuda_batching_and_logprobs(tiny_model_dir):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

    async def scenario():
        engine = TorchEngine(tiny_model_dir, device="cuda", dtype="float32")
        try:
            target = request(prompt(10), temperature=1.0, top_p=0.9, max_tokens=32, seed=7)
            alone = await engine.generate(target)
            together = await asyncio.gather(
                engine.generate(target),
                *(engine.generate(request(prompt(3 + 4 * i), max_tokens=20)) for i in range(16)),
            )
            return engine, alone, together[0]
        finally:
            await engine.close()

    engine, alone, together = asyncio.run(scenario())
    assert together.token_ids == alone.token_ids
    full = torch.tensor([prompt(10) + alone.token_ids], device="cuda")
    with torch.inference_mode():
        logits = engine.model(full).logits[0, 9:-1]
    expected = token_logprobs(logits, torch.tensor(alone.token_ids, device="cuda"), 1.0, 0.9).cpu()
    torch.testing.assert_close(torch.tensor(alone.logprobs), expected, atol=1e-3, rtol=1e-3)


def test_a_sleeping_engine_holds_generation_and_goes_on_where_it_was_on_waking(tiny_model_dir):
    """What a colocated trainer's step sees: nothing is generated while the engine sleeps, and the request in
    flight then continues to the tokens it would have had."""
    ids = prompt(6)

    async def slept() -> tuple[list[int], list[int], int, int]:
        engine = TorchEngine(tiny_model_dir, device="cpu")
        engine.eos_token_ids = frozenset()
        try:
            task = asyncio.create_task(engine.generate(request(ids, temperature=0.0, max_tokens=400)))
            await generated(engine, 5)
            await engine.sleep()
            asleep_at = engine.stats().generated_tokens
            await asyncio.sleep(0.3)
            held = engine.stats().generated_tokens - asleep_at
            assert not task.done()
            await engine.wake_up()
            result = await task
            again = await engine.generate(request(ids, temperature=0.0, max_tokens=400))
            return result.token_ids, again.token_ids, held, asleep_at
        finally:
            await engine.close()

    interrupted, uninterrupted, held, asleep_at = asyncio.run(slept())
    assert held == 0 and 5 <= asleep_at < 400
    assert interrupted == uninterrupted and len(interrupted) == 400


def test_stream_hands_out_the_tokens_of_generate_as_they_are_sampled(engine):
    async def scenario():
        sampling = {"max_tokens": 24, "seed": 11, "temperature": 1.0}
        whole = await engine.generate(request(prompt(9), **sampling))
        chunks = [chunk async for chunk in engine.stream(request(prompt(9), **sampling))]
        return whole, chunks

    whole, chunks = asyncio.run(scenario())
    assert len(chunks) > 1 and all(c.finish_reason is None for c in chunks[:-1])
    assert chunks[-1].finish_reason == whole.finish_reason
    assert [t for c in chunks for t in c.token_ids] == whole.token_ids
    assert [lp for c in chunks for lp in c.logprobs] == pytest.approx(whole.logprobs)
    assert [v for c in chunks for v in c.versions] == whole.versions


def test_leaving_a_stream_drops_its_request(tiny_model_dir):
    async def scenario():
        engine = TorchEngine(tiny_model_dir, device="cpu")
        engine.eos_token_ids = frozenset()
        try:
            received = 0
            async for chunk in engine.stream(request(prompt(5), max_tokens=4000)):
                received += len(chunk.token_ids)
                assert engine.in_flight == 1
                if received >= 3:
                    break
            await until_async(lambda: engine.in_flight == 0, "the engine dropping the request")
            return engine.in_flight, engine.stats()
        finally:
            await engine.close()

    in_flight, stats = asyncio.run(scenario())
    assert in_flight == 0 and stats.generated_tokens < 4000, "the request ran to its end"
