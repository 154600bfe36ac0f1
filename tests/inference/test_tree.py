"""LATR's tree phase: the branch rule on crafted distributions, the width cap, the η schedule, pruning by each
measure with the end-token and math-token exemptions, the exit; then the torch engine's forks, whose copied KV rows
give the logits a fresh prefill gives."""

from __future__ import annotations

import asyncio

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from transformers import AutoModelForCausalLM

from agentgym.inference.sampling import sampling_logprobs
from agentgym.inference.torch._batch import KVBatch
from agentgym.inference.torch.engine import TorchEngine
from agentgym.inference.tree import ExitBatch, LatrParams, TreeSearch, branch_tokens, math_token_ids
from agentgym.inference.types import GenerationRequest, SamplingParams
from tests.waiting import until_async

LATR = LatrParams()
EOS = 99


# ---- the branch rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("probs", "branches"),
    [
        ([0.50, 0.40], [1]),  # above tau_abs (0.25), within tau_rel (0.15) of the top
        ([0.60, 0.30], []),  # likely enough, but the top is 0.30 ahead
        ([0.30, 0.20], []),  # close to the top, but under tau_abs
        ([0.40, 0.25], []),  # tau_abs is strict: 0.25 is not above it
        ([0.45, 0.30], []),  # tau_rel is strict: 0.15 behind is not within it
    ],
)
def test_the_branch_rule_on_crafted_distributions(probs, branches):
    assert branch_tokens([10, 11][: len(probs)], probs, LATR) == [10 + i for i in branches]


def test_with_top_3_every_candidate_that_passes_branches_in_rank_order():
    params = LatrParams(top_k=3)
    assert branch_tokens([7, 8, 9], [0.34, 0.33, 0.32], params) == [8, 9]
    assert branch_tokens([7, 8, 9], [0.40, 0.30, 0.20], params) == [8]


@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=6), st.floats(0.01, 0.99), st.floats(0.01, 1.0))
def test_the_rule_keeps_exactly_the_candidates_it_names(raw, tau_abs, tau_rel):
    probs = sorted(raw, reverse=True)
    params = LatrParams(top_k=len(probs), tau_abs=tau_abs, tau_rel=tau_rel)
    kept = branch_tokens(list(range(len(probs))), probs, params)
    assert kept == [i for i in range(1, len(probs)) if probs[i] > tau_abs and probs[0] - probs[i] < tau_rel]


# ---- the η schedule and the settings ------------------------------------------------------------------


def test_the_width_follows_latrs_schedule():
    assert [LATR.eta(step) for step in (0, 9, 10, 19, 20, 79, 80, 199, 200, 10_000)] == [
        1.0, 1.0, 0.75, 0.75, 0.5, 0.5, 0.25, 0.25, 0.0, 0.0]
    assert [LATR.width(8, step) for step in (0, 10, 20, 80, 200)] == [8, 6, 4, 2, 0]


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"top_k": 1}, "top_k"),
        ({"tau_abs": 1.5}, "tau_abs"),
        ({"lookahead": ()}, "lookahead"),
        ({"lookahead": (0, 20)}, "lookahead"),
        ({"width_schedule": {10: 0.5}}, "width_schedule"),
        ({"width_schedule": {0: 1.5}}, "width_schedule"),
        ({"prune_measure": "rouge"}, "prune_measure"),  # not a setting: each measure has its own threshold
        ({"rouge_l_threshold": 1.0}, "rouge_l_threshold"),
        ({"suffix_match_threshold": -0.1}, "suffix_match_threshold"),
        ({"branch_factor": 3}, "branch_factor"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(settings, key):
    with pytest.raises(ValidationError, match=key):
        LatrParams(**settings)


# ---- the tree phase on crafted steps ---------------------------------------------------------------------


def top(first: int, second: int, split: bool) -> tuple[list[int], list[float]]:
    """A branch's top-2: a close call (it branches) or a clear one."""
    return [first, second], [0.45, 0.40] if split else [0.9, 0.05]


def test_forks_fill_the_tree_up_to_its_width_and_the_rest_are_suppressed():
    tree = TreeSearch(LatrParams(lookahead=(50,)), width=3, eos_ids={EOS}, max_tokens=200)
    first = tree.advance({0: top(1, 2, True)})
    assert first.forks == [(1, 0, 2)] and tree.branches[1].tokens == [2] and tree.branches[0].tokens == [1]
    second = tree.advance({0: top(3, 4, True), 1: top(5, 6, True)})
    assert second.forks == [(2, 0, 4)] and second.suppressed == 1  # branch order decides who gets the room
    assert tree.branches[2].tokens == [1, 4] and tree.branches[2].birth == 1
    assert len(tree.branches) == 3 and tree.made == 2 and tree.suppressed == 1


def test_a_child_that_stays_close_to_its_parent_is_pruned_with_its_descendants():
    params = LatrParams(lookahead=(4,), prune_threshold=0.4)
    tree = TreeSearch(params, width=4, eos_ids={EOS}, max_tokens=200)
    tree.advance({0: top(1, 2, True)})  # child 1 takes 2 where the root takes 1
    tree.advance({0: top(3, 0, False), 1: top(5, 6, True)})  # child 1 forks grandchild 2
    tree.advance({0: top(3, 0, False), 1: top(3, 0, False), 2: top(8, 0, False)})
    decision = tree.advance({0: top(3, 0, False), 1: top(3, 0, False), 2: top(8, 0, False)})
    # child 1 vs the root since the fork: [2, 5, 3, 3] vs [1, 3, 3, 3]: 2 edits in 4 tokens, 0.5: kept
    assert decision.pruned == []
    tree2 = TreeSearch(params, width=4, eos_ids={EOS}, max_tokens=200)
    tree2.advance({0: top(1, 2, True)})
    tree2.advance({0: top(3, 0, False), 1: top(3, 6, True)})
    tree2.advance({0: top(3, 0, False), 1: top(3, 0, False), 2: top(8, 0, False)})
    decision = tree2.advance({0: top(3, 0, False), 1: top(3, 0, False), 2: top(8, 0, False)})
    # [2, 3, 3, 3] vs [1, 3, 3, 3]: 1 edit in 4, 0.25 < 0.4: the child goes, and its child 2 with it
    assert sorted(decision.pruned) == [1, 2] and set(tree2.branches) == {0} and tree2.pruned == 2


def test_a_fork_at_a_math_token_is_never_pruned_and_the_others_are():
    """``21+5`` against ``21+6`` differs in one token of many, but in value: with the exemption the child stays,
    without it it goes; a fork elsewhere goes either way. Each decision lands on its own branch."""
    def grow(keep: bool) -> set[int]:
        params = LatrParams(lookahead=(4,), keep_math_symbols=keep)
        tree = TreeSearch(params, width=3, eos_ids={EOS}, max_tokens=200, math_ids={5, 6})
        tree.advance({0: top(5, 6, True)})  # child 1 forks at a math token
        tree.advance({0: top(3, 0, False), 1: top(3, 0, False)})
        tree.advance({0: top(7, 8, True), 1: top(7, 0, False)})  # child 2 forks at a plain token
        for _ in range(3):
            tree.advance({index: top(3, 0, False) for index in tree.live()})
        return set(tree.branches)

    assert grow(keep=True) == {0, 1}  # 1 (6 3 7 3 vs 5 3 7 3) kept; 2 (8 3 3 3 vs 7 3 3 3) pruned at age 4
    assert grow(keep=False) == {0}


def test_the_math_tokens_of_a_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids = math_token_ids(tokenizer)
    assert set(tokenizer.encode("21+5=(26)*1", add_special_tokens=False)) <= ids
    assert not set(tokenizer.encode("the cat, a\n ", add_special_tokens=False)) & ids  # no whitespace either
    assert math_token_ids(tokenizer) is ids  # computed once


def test_a_span_that_reaches_the_end_token_is_never_pruned():
    tree = TreeSearch(LatrParams(lookahead=(3,)), width=2, eos_ids={EOS}, max_tokens=200)
    tree.advance({0: top(1, 2, True)})
    tree.advance({0: top(3, 0, False), 1: top(3, 0, False)})
    decision = tree.advance({0: top(3, 0, False), 1: top(EOS, 0, False)})  # the child ends at age 3
    assert decision.pruned == [] and tree.branches[1].done
    assert tree.live() == [0]


def test_the_tree_phase_ends_when_full_and_past_the_longest_lookahead_or_when_forced():
    tree = TreeSearch(LatrParams(lookahead=(2, 3)), width=2, eos_ids={EOS}, max_tokens=100)
    tree.advance({0: top(1, 2, True)})  # full at once: two branches
    steps = 1
    while not tree.exited:
        tree.advance({index: top(10 * index + steps, 9, False) for index in tree.live()})  # apart: kept
        steps += 1
    assert steps == 4 and len(tree.branches) == 2  # the child, born at 0, is older than 3 at step 4
    forced = TreeSearch(LatrParams(forced_exit=5), width=4, eos_ids={EOS}, max_tokens=100)
    for step in range(5):
        assert not forced.exited
        forced.advance({index: top(step, 9, False) for index in forced.live()})
    assert forced.exited and len(forced.branches) == 1
    pruned = TreeSearch(LatrParams(lookahead=(2, 3)), width=2, eos_ids={EOS}, max_tokens=6)
    pruned.advance({0: top(1, 2, True)})
    while not pruned.exited:  # the look-alike child goes at age 3: the tree is no longer full
        pruned.advance({index: top(5, 9, False) for index in pruned.live()})
    assert pruned.pruned == 1 and pruned.step == 6  # so it branches on until its tokens run out
    with pytest.raises(RuntimeError, match="tree phase has ended"):
        forced.advance({0: top(1, 2, False)})


def test_under_a_batch_exit_a_ready_tree_branches_on_until_every_tree_of_its_batch_is_ready():
    def step(tree: TreeSearch, fork: bool = False) -> None:  # the root forks if asked; branches stay apart
        tree.advance({i: top(10 * i + tree.step, 9, fork and i == 0) for i in tree.live()})

    batch = ExitBatch()
    params = LatrParams(lookahead=(2,), exit_scope="batch")
    quick, slow = (TreeSearch(params, width=2, eos_ids={EOS}, max_tokens=100, batch=batch) for _ in range(2))
    alone = TreeSearch(params.model_copy(update={"exit_scope": "prompt"}), width=2, eos_ids={EOS}, max_tokens=100,
                       batch=batch)  # decides for itself
    for n in range(3):
        step(quick, fork=n == 0)
        step(alone, fork=n == 0)
        step(slow, fork=n == 2)
    assert alone.exited and not quick.exited  # both full with their child 3 old; quick waits for slow's child
    while not slow.exited:
        step(quick)
        step(slow)
    step(quick)
    assert (slow.step, quick.step, quick.exited) == (5, 6, True)  # slow ready at 5; quick ends at its next step
    late, gone = (TreeSearch(params, width=2, eos_ids={EOS}, max_tokens=100, batch=batch) for _ in range(2))
    gone.end()  # a tree that ends otherwise (its caller left) does not hold its batch
    for n in range(3):
        step(late, fork=n == 0)
    assert late.exited  # in a new batch, not the one that ended before it joined


def test_steps_must_cover_exactly_the_live_branches():
    tree = TreeSearch(LATR, width=2, eos_ids={EOS}, max_tokens=10)
    with pytest.raises(ValueError, match="live branches"):
        tree.advance({0: top(1, 2, False), 3: top(1, 2, False)})


# ---- the torch engine's forks ---------------------------------------------------------------------------


def test_a_forked_kv_row_gives_the_logits_of_a_fresh_prefill(tiny_model_dir):
    """Grouped heads (4 query heads over 2 KV heads): the fork copies the parent's rows after a prefill and
    after decode steps; each copy, fed its own token, matches a prefill of its whole context."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    cpu = torch.device("cpu")
    contexts = [list(range(5, 30)), list(range(40, 52))]
    with torch.inference_mode():
        batch, _ = KVBatch.prefill(model, contexts, cpu)
        batch.fork([1, 0])  # rows 2 and 3 copy rows 1 and 0
        logits = batch.decode(model, torch.tensor([7, 8, 9, 10]))
        fresh = KVBatch.prefill(model, [[*contexts[1], 9], [*contexts[0], 10]], cpu)[1]
        torch.testing.assert_close(logits[2:], fresh, atol=1e-4, rtol=1e-4)
        batch.fork([2])  # row 4 copies row 2, after a decode step
        logits = batch.decode(model, torch.tensor([1, 2, 3, 4, 5]))
        fresh = KVBatch.prefill(model, [[*contexts[1], 9, 3], [*contexts[1], 9, 5]], cpu)[1]
        torch.testing.assert_close(logits[[2, 4]], fresh, atol=1e-4, rtol=1e-4)


BRANCHY = LatrParams(tau_abs=1e-4, tau_rel=1.0, lookahead=(3,), prune_threshold=0.2, forced_exit=12)
"""Settings under which the tiny untrained model (a flat distribution) branches at once."""


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    engine = TorchEngine(tiny_model_dir, seed=0)
    yield engine
    asyncio.run(engine.close())


async def growing(engine: TorchEngine) -> None:
    """Wait until ``engine`` generates tokens beyond those it had when called (the tree just asked for grows)."""
    before = engine.stats().generated_tokens
    await until_async(lambda: engine.stats().generated_tokens > before, "the tree growing", every=0.001)


def tree_request(seed: int = 1, max_tokens: int = 20) -> GenerationRequest:
    sampling = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=max_tokens, seed=seed)
    return GenerationRequest(prompt_ids=list(range(5, 25)), sampling=sampling)


def test_the_engine_grows_a_tree_whose_every_token_is_what_its_model_gives(engine, tiny_model_dir):
    result = asyncio.run(engine.generate_tree(tree_request(), BRANCHY, 4))
    branches = {b.branch: b for b in result.branches}
    assert 2 <= len(branches) <= 4 and result.made >= len(branches) - 1 and 0 in branches
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    prompt = tree_request().prompt_ids
    for branch in branches.values():
        tokens, chosen = branch.result.token_ids, branch.result.tree_chosen
        phase = chosen.index(False) if False in chosen else len(chosen)
        assert phase >= 1 and not any(chosen[phase:])  # the tree phase is a prefix of every branch
        if branch.parent is not None:
            parent = branches[branch.parent].result.token_ids
            assert tokens[: branch.fork_at] == parent[: branch.fork_at]
            assert tokens[branch.fork_at] != parent[branch.fork_at]
        with torch.inference_mode():
            logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
        raw = torch.log_softmax(logits, dim=-1)
        forked_on, ancestor = set(), branch
        while ancestor.parent is not None:  # where this branch or an ancestor took the second candidate
            forked_on.add(ancestor.fork_at)
            ancestor = branches[ancestor.parent]
        for position in range(phase):
            rank = 1 if position in forked_on else 0
            assert int(raw[position].topk(2).indices[rank]) == tokens[position]
        expected = sampling_logprobs(logits, 0.8, 0.95).gather(1, torch.tensor(tokens)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(branch.result.logprobs), expected, atol=1e-4, rtol=0)
    kept = sum(len(b.result.token_ids) - b.fork_at for b in branches.values())  # each token decoded once
    assert result.tree_tokens <= result.decoded_tokens and result.decoded_tokens >= kept


def test_a_tree_is_the_same_for_the_same_seed_and_its_cancel_leaves_nothing_running(engine):
    async def twice_then_cancel():
        first = await engine.generate_tree(tree_request(seed=3), BRANCHY, 3)
        second = await engine.generate_tree(tree_request(seed=3), BRANCHY, 3)
        task = asyncio.create_task(engine.generate_tree(tree_request(seed=4, max_tokens=400), BRANCHY, 4))
        await growing(engine)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until_async(lambda: engine.in_flight == 0, "the engine dropping the cancelled tree")
        return first, second

    first, second = asyncio.run(twice_then_cancel())
    assert [b.result.token_ids for b in first.branches] == [b.result.token_ids for b in second.branches]
    assert engine.in_flight == 0


def test_a_weight_update_ends_the_tree_phase_and_every_branch_still_finishes(engine, tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}

    long_phase = BRANCHY.model_copy(update={"lookahead": (150,), "forced_exit": 150})

    async def update_mid_tree():
        task = asyncio.create_task(engine.generate_tree(tree_request(max_tokens=200), long_phase, 4))
        await growing(engine)
        version = await engine.update_weights(state)
        return await task, version

    result, version = asyncio.run(update_mid_tree())
    assert all(b.result.finish_reason in ("stop", "length") for b in result.branches)
    root = next(b.result for b in result.branches if b.branch == 0)
    assert root.versions[0] < version == root.versions[-1]  # the update came mid-tree
    for branch in result.branches:
        chosen_under = {v for v, chosen in zip(branch.result.versions, branch.result.tree_chosen, strict=True) if chosen}
        assert version not in chosen_under  # after the update every token was sampled


def test_closing_the_engine_mid_tree_settles_the_tree_with_its_branches_aborted(tiny_model_dir):
    async def close_mid_tree():
        engine = TorchEngine(tiny_model_dir, seed=0)
        task = asyncio.create_task(engine.generate_tree(tree_request(max_tokens=400), BRANCHY, 4))
        await growing(engine)
        await engine.close()
        return await asyncio.wait_for(task, 60)

    result = asyncio.run(close_mid_tree())
    reasons = [b.result.finish_reason for b in result.branches]
    assert "abort" in reasons and set(reasons) <= {"abort", "stop"}  # a branch that had ended keeps its end


def test_trees_grown_together_under_a_batch_exit_end_their_tree_phase_together(engine):
    """A quick tree (its lookahead 2) and a slow one (12): alone the quick one samples on after a few steps; in
    the slow one's batch it stays in the tree phase until the slow one is ready."""
    quick = BRANCHY.model_copy(update={"lookahead": (2,), "forced_exit": 40})
    slow = quick.model_copy(update={"lookahead": (12,)})

    def phase(result) -> int:
        return min(b.result.tree_chosen.index(False) if False in b.result.tree_chosen else len(b.result.tree_chosen)
                   for b in result.branches)

    async def together(scope: str):
        settings = {"exit_scope": scope}
        return await asyncio.gather(
            engine.generate_tree(tree_request(seed=5, max_tokens=30), quick.model_copy(update=settings), 2),
            engine.generate_tree(tree_request(seed=6, max_tokens=30), slow.model_copy(update=settings), 2))

    (quick_alone, slow_alone), (quick_batch, slow_batch) = asyncio.run(together("prompt")), asyncio.run(together("batch"))
    assert phase(quick_alone) < 12 <= phase(slow_alone)
    assert phase(quick_batch) >= 12 and phase(slow_batch) >= 12
