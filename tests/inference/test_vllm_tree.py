"""LATR trees on the ``vllm`` engine for real (vLLM's CPU build here): a tree grown from greedy chunks with their
top-k logprobs, whose tree phase is greedy decoding and the very tree the torch engine grows from the same
weights; forks served by vLLM's prefix cache; a cancelled tree leaves no request in vLLM; a weight update ends the
tree phase; trees of one batch end their tree phase together. One vLLM engine serves the module (about 45 s to start on two cores)."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym.inference.sampling import sampling_logprobs
from agentgym.inference.torch.engine import TorchEngine
from agentgym.inference.tree import LatrParams
from agentgym.inference.types import GenerationRequest, SamplingParams, TreeResult
from tests.waiting import until_async

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(300)]

BLOCK = 32
"""vLLM's KV block (its CPU default is 128): the prefix cache serves whole blocks, as on a GPU (16 there)."""
PROMPT = [5 + (7 * i) % 200 for i in range(100)]
"""A prompt of a few blocks, so that a fork's request finds most of its prefix cached."""
BRANCHY = LatrParams(tau_abs=1e-4, tau_rel=1.0, lookahead=(3,), prune_threshold=0.2, forced_exit=12)
"""Settings under which the tiny untrained model (a flat distribution) branches at once."""
LONG_PHASE = BRANCHY.model_copy(update={"lookahead": (150,), "forced_exit": 150})


@pytest.fixture(scope="module")
def engine(background, tiny_model_dir):
    from agentgym.inference.vllm.engine import VLLMEngine

    async def build() -> VLLMEngine:  # built on the loop that serves it
        return VLLMEngine(tiny_model_dir, seed=0, max_model_len=2048, block_size=BLOCK)

    engine = background.run(build())
    yield engine
    background.run(engine.close())


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def tree_request(seed: int = 1, max_tokens: int = 20) -> GenerationRequest:
    sampling = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=max_tokens, seed=seed)
    return GenerationRequest(prompt_ids=PROMPT, sampling=sampling)


def tree_phase(result: TreeResult) -> dict[int, tuple[int | None, int, list[int]]]:
    """Each branch's parent, fork position and tree-phase tokens."""
    return {b.branch: (b.parent, b.fork_at, [t for t, chosen in zip(b.result.token_ids, b.result.tree_chosen,
                                                                       strict=True) if chosen])
            for b in result.branches}


def test_the_tree_phase_is_greedy_and_the_torch_engines_tree(background, engine, model, tiny_model_dir, capsys):
    request = tree_request()
    result = background.run(engine.generate_tree(request, BRANCHY, 4))
    branches = {b.branch: b for b in result.branches}
    assert 2 <= len(branches) <= 4 and 0 in branches and result.made >= len(branches) - 1
    greedy_checks = []
    for branch in branches.values():
        tokens, chosen, logprobs = branch.result.token_ids, branch.result.tree_chosen, branch.result.logprobs
        phase = chosen.count(True)
        assert phase >= 1 and chosen == [True] * phase + [False] * (len(tokens) - phase)
        assert branch.result.versions == [0] * len(tokens) and branch.result.finish_reason in ("stop", "length")
        start = 0
        if branch.parent is not None:  # a child shares its parent's tokens up to its fork, and forks on another one
            parent = branches[branch.parent].result.token_ids
            assert tokens[: branch.fork_at] == parent[: branch.fork_at] and tokens[branch.fork_at] != parent[branch.fork_at]
            start = branch.fork_at + 1
        if phase > start:  # after the token it forked on, a branch's tree tokens are greedy decoding
            greedy = SamplingParams(temperature=0, max_tokens=phase - start)
            greedy_checks.append((tokens[start:phase], GenerationRequest(prompt_ids=PROMPT + tokens[:start],
                                                                         sampling=greedy)))
        with torch.inference_mode():
            logits = model(torch.tensor([PROMPT + tokens])).logits[0, len(PROMPT) - 1 : -1]
        ids = torch.tensor(tokens)[:, None]
        untempered = torch.log_softmax(logits[:phase], -1).gather(1, ids[:phase])[:, 0]
        sampled = sampling_logprobs(logits[phase:], 0.8, 0.95).gather(1, ids[phase:])[:, 0]
        torch.testing.assert_close(torch.tensor(logprobs), torch.cat([untempered, sampled]), atol=1e-4, rtol=0)

    async def decode(requests: list[GenerationRequest]) -> list[list[int]]:
        return [r.token_ids for r in await asyncio.gather(*(engine.generate(r) for r in requests))]

    assert background.run(decode([r for _, r in greedy_checks])) == [expected for expected, _ in greedy_checks]

    assert result.fork_prompt_tokens > 0 and result.fork_cached_tokens > 0
    rate = result.fork_cached_tokens / result.fork_prompt_tokens
    with capsys.disabled():
        print(f"\nvLLM tree: {len(branches)} branches, {result.made} forks, {result.pruned} pruned; forks' prompt "
              f"tokens served by the prefix cache: {result.fork_cached_tokens}/{result.fork_prompt_tokens} "
              f"({rate:.0%}, {BLOCK}-token blocks); {result.decoded_tokens} tokens decoded for {result.tree_tokens} "
              "tree tokens and the sampled rest")

    torch_engine = TorchEngine(tiny_model_dir, seed=0, dtype="float32")
    try:
        on_torch = asyncio.run(torch_engine.generate_tree(request, BRANCHY, 4))
    finally:
        asyncio.run(torch_engine.close())
    assert tree_phase(on_torch) == tree_phase(result)
    assert (on_torch.made, on_torch.pruned, on_torch.suppressed, on_torch.tree_tokens) == (
        result.made, result.pruned, result.suppressed, result.tree_tokens)


def _unfinished(engine) -> int:
    """Requests vLLM still holds."""
    return engine.llm.output_processor.get_num_unfinished_requests()


def test_cancelling_a_tree_leaves_no_request_in_vllm(background, engine):
    async def cancel_mid_tree() -> int:
        requests = engine.stats().requests
        task = asyncio.create_task(engine.generate_tree(tree_request(max_tokens=400), LONG_PHASE, 4))
        while engine.stats().requests < requests + 3 and not task.done():  # the root's chunk and some forks'
            await asyncio.sleep(0.01)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until_async(lambda: _unfinished(engine) == 0, "vLLM dropping the cancelled tree's requests")
        return _unfinished(engine)

    assert background.run(cancel_mid_tree()) == 0
    after = background.run(engine.generate(tree_request(max_tokens=4)))
    assert after.finish_reason == "length" and len(after.token_ids) == 4


def test_trees_grown_together_under_a_batch_exit_end_their_tree_phase_together(background, engine):
    """As on the torch engine: a quick tree waits in the tree phase for a slow one of its batch; a cancelled tree
    of the batch does not hold it."""
    quick = BRANCHY.model_copy(update={"lookahead": (2,), "forced_exit": 40, "exit_scope": "batch"})
    slow = quick.model_copy(update={"lookahead": (12,)})

    def phase(result: TreeResult) -> int:  # the step its tree phase ended at
        return max(b.result.tree_chosen.count(True) for b in result.branches)

    async def together() -> list[TreeResult]:
        gone = asyncio.create_task(engine.generate_tree(tree_request(seed=7, max_tokens=400), LONG_PHASE.model_copy(
            update={"exit_scope": "batch"}), 4))
        await asyncio.sleep(0)
        grown = asyncio.gather(engine.generate_tree(tree_request(seed=5, max_tokens=30), quick, 2),
                               engine.generate_tree(tree_request(seed=6, max_tokens=30), slow, 2))
        gone.cancel()
        return await grown

    quick_batch, slow_batch = background.run(together())
    assert 12 <= phase(quick_batch) < 30 and 12 <= phase(slow_batch) < 30  # neither ran to its last token

def test_a_weight_update_ends_the_tree_phase_and_every_branch_still_finishes(background, engine, model):
    async def update_mid_tree() -> tuple[TreeResult, int]:
        requests = engine.stats().requests
        task = asyncio.create_task(engine.generate_tree(tree_request(max_tokens=200), LONG_PHASE, 4))
        while engine.stats().requests < requests + 3 and not task.done():
            await asyncio.sleep(0.01)
        version = await engine.update_weights(model.state_dict())
        return await task, version

    result, version = background.run(update_mid_tree())
    assert all(b.result.finish_reason in ("stop", "length") for b in result.branches)
    root = next(b.result for b in result.branches if b.branch == 0)
    assert root.tree_chosen[0] and version in root.versions  # the update came during the tree phase
    for branch in result.branches:
        tree = [v for v, chosen in zip(branch.result.versions, branch.result.tree_chosen, strict=True) if chosen]
        assert version not in tree  # every tree token came from the weights the tree started with
