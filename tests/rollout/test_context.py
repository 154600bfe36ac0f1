"""Token segments and context policies: a template that rewrites earlier turns (Qwen3's rule) and a conversation
compacted past its budget both start a new segment, rendered afresh; what each request showed the model is exactly
the segment its response is trained in. Long Shell episodes keep within budget; overflow ends as configured."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers import AutoTokenizer

from agentgym import Task, run_episode
from agentgym.inference import SamplingParams
from agentgym.inference.torch.engine import TorchEngine
from agentgym.messages import Message
from agentgym.policies.context import ContextPolicy
from agentgym.policies.lm import LMPolicy
from agentgym.policies.render import ChatRenderer
from agentgym.policies.tokens import TokenRecord
from agentgym.registration import make
from agentgym.trainers.batch import collate
from agentgym.trajectory import Trajectory
from tests.qwen3_style import qwen3_style_model
from tests.rollout.recording import RecordingEngine

SHELL = "tools/Shell-v0"


@pytest.fixture(scope="module")
def qwen3_dir(tiny_model_dir, tmp_path_factory) -> Path:
    return qwen3_style_model(tiny_model_dir, tmp_path_factory.mktemp("qwen3") / "model")


def _play(model_dir: Path, env_id: str, seed: int, *, max_context: int = 4096, context: ContextPolicy | None = None,
          max_tokens: int = 24, **env_kwargs: object) -> tuple[Trajectory, RecordingEngine]:
    async def scenario() -> tuple[Trajectory, RecordingEngine]:
        engine = RecordingEngine(TorchEngine(model_dir, seed=seed))
        env = make(env_id, **env_kwargs)
        try:
            policy = LMPolicy(engine, SamplingParams(max_tokens=max_tokens), max_context=max_context,  # type: ignore[arg-type]
                              context=context)
            return await run_episode(env, policy, Task(env_id=env_id, seed=seed)), engine
        finally:
            env.close()
            await engine.close()

    return asyncio.run(scenario())


def _responses(trajectory: Trajectory) -> list[tuple[int, int]]:
    """Each response's ``(start, end)``: the runs of agent tokens, in order."""
    mask, runs = trajectory.loss_mask, []
    for i, agent in enumerate(mask):
        if agent and (i == 0 or not mask[i - 1]):
            runs.append([i, i + 1])
        elif agent:
            runs[-1][1] = i + 1
    return [(a, b) for a, b in runs]


def _assert_requests_are_the_segments(trajectory: Trajectory, engine: RecordingEngine) -> None:
    """The exactness the trainer relies on: each response follows, inside its segment, exactly the ids the engine
    was sent for it (so one row per segment trains every token under the context that sampled it)."""
    starts = [0, *trajectory.segments]
    responses = _responses(trajectory)
    assert len(responses) == len(engine.requests) == trajectory.num_turns
    for (start, end), request in zip(responses, engine.requests, strict=True):
        segment = max(s for s in starts if s <= start)
        assert trajectory.token_ids[segment:start] == request.prompt_ids
        assert trajectory.logprobs[start:end] and all(lp <= 0 for lp in trajectory.logprobs[start:end])


# -- a template that rewrites earlier turns ------------------------------------------------------------------

def test_a_template_that_drops_past_reasoning_starts_a_segment_only_where_it_rewrites(qwen3_dir):
    tokenizer = AutoTokenizer.from_pretrained(qwen3_dir)
    record = TokenRecord(ChatRenderer(tokenizer), [])
    eos = tokenizer.eos_token_id
    record.observe([Message(role="user", content="Count the apples.")])
    thought = tokenizer.encode("<think>\nthree?\n</think>\n\nsay 3") + [eos]
    record.respond(thought, [-0.5] * len(thought), [0] * len(thought))
    # a tool's answer is no new query: the turn keeps its reasoning, the ids only grow
    record.observe([Message(role="tool", content="3 apples")])
    assert record.segments == [0]
    plain = tokenizer.encode("done") + [eos]
    record.respond(plain, [-0.25] * len(plain), [0] * len(plain))
    # a new user query: earlier turns lose their reasoning, so the prompt is rendered afresh as a new segment
    context = record.observe([Message(role="user", content="And pears?")])
    assert len(record.segments) == 2
    rendered = tokenizer.decode(context)
    assert "three?" not in rendered and rendered.endswith("<|im_start|>user\nAnd pears?<|im_end|>\n<|im_start|>assistant\n")
    assert "<|im_start|>assistant\nsay 3<|im_end|>" in rendered

    trajectory = Trajectory(env_id="test")
    record.write(trajectory)
    first, second = trajectory.segment_spans()
    assert trajectory.token_ids[first[0]:first[1]].count(eos) >= 2  # the model's own ids, reasoning and all
    assert thought == trajectory.token_ids[_responses(trajectory)[0][0]:_responses(trajectory)[0][1]]
    assert not any(trajectory.loss_mask[second[0]:second[1]])  # the re-rendered history is never trained
    assert sum(trajectory.loss_mask) == len(thought) + len(plain)


def test_an_episode_under_a_qwen3_style_template_sends_the_template_s_prompt_and_records_it_exactly(qwen3_dir):
    trajectory, engine = _play(qwen3_dir, "games/FrozenLake-v0", 5, max_turns=4)
    assert trajectory.status in ("ok", "truncated") and trajectory.num_turns >= 2
    assert trajectory.segments  # every user observation after an answer without reasoning rewrites that answer
    _assert_requests_are_the_segments(trajectory, engine)
    renderer = ChatRenderer(engine.tokenizer)
    for start, request in zip([0, *trajectory.segments], engine.requests, strict=False):
        assert start in (0, *trajectory.segments)
        assert renderer.tokenizer.decode(request.prompt_ids).endswith("<|im_start|>assistant\n")
    batch = collate([trajectory], torch.tensor([1.0]), pad_id=0)
    assert batch.rows == len(trajectory.segments) + 1 and batch.agent_tokens == sum(trajectory.loss_mask)


# -- context policies ------------------------------------------------------------------------------------------

def test_a_long_shell_episode_is_summarised_within_its_budget_keeping_system_prompt_and_task(tiny_model_dir, local):
    context = ContextPolicy(strategy="summarise", budget=1400)
    trajectory, engine = _play(tiny_model_dir, SHELL, 3, max_context=2048, context=context, max_tokens=32,
                               backend="local", max_turns=16)
    assert trajectory.status == "truncated" and trajectory.num_turns == 16  # the turn limit, not the context
    assert trajectory.segments
    _assert_requests_are_the_segments(trajectory, engine)
    assert all(len(r.prompt_ids) <= 1400 for r in engine.requests)
    head = engine.requests[0].prompt_ids[:-len(engine.tokenizer.encode("<|im_start|>assistant\n"))]
    assert all(r.prompt_ids[:len(head)] == head for r in engine.requests)  # system prompt, tools and task kept
    late = engine.tokenizer.decode(engine.requests[-1].prompt_ids)
    assert "[earlier output: 3 more lines left out]" in late
    assert late.count("<|im_start|>assistant\n") > 2  # summarised turns keep the agent's own messages
    batch = collate([trajectory], torch.tensor([1.0]), pad_id=0)
    assert batch.rows == len(trajectory.segments) + 1 and batch.agent_tokens == sum(trajectory.loss_mask)


def test_drop_removes_the_oldest_turns_and_a_per_turn_budget_cuts_each_observation(tiny_model_dir, local):
    context = ContextPolicy(strategy="drop", budget=700, observation_tokens=12)
    trajectory, engine = _play(tiny_model_dir, SHELL, 4, max_context=1024, context=context, max_tokens=32,
                               backend="local", max_turns=10)
    assert trajectory.segments and trajectory.num_turns == 10
    _assert_requests_are_the_segments(trajectory, engine)
    late = engine.tokenizer.decode(engine.requests[-1].prompt_ids)
    assert "more tokens cut]" in late and "earlier output" not in late
    assert late.count("<|im_start|>assistant\n") < 10  # the oldest turns are gone
    task = trajectory.messages[1].text if trajectory.messages[0].role == "system" else trajectory.messages[0].text
    assert task in late  # the task is never cut or dropped


@pytest.mark.parametrize(("overflow", "status", "reward"), [("truncation", "truncated", None), ("failure", "ok", 0.0),
                                                           ("penalty", "ok", -2.5)])
def test_an_overflowing_episode_ends_as_its_policy_says(tiny_model_dir, overflow, status, reward):
    context = ContextPolicy(overflow=overflow, penalty=-2.5)
    trajectory, _ = _play(tiny_model_dir, "games/FrozenLake-v0", 2, max_context=420, context=context,
                          max_tokens=48, max_turns=30)
    assert trajectory.status == status and not trajectory.success
    assert trajectory.info["overflow"]["outcome"] == overflow
    assert "fills the context" in trajectory.info["overflow"]["cause"]
    if reward is not None:
        assert trajectory.reward == reward


# -- compaction itself ----------------------------------------------------------------------------------------

_text = st.text(st.characters(categories=("L", "N", "Zs")), min_size=1, max_size=12)
_observation = st.lists(_text, min_size=1, max_size=4).map(lambda lines: Message(role="user", content="\n".join(lines)))
_turn = st.tuples(_text.map(lambda t: Message(role="assistant", content=t)), st.lists(_observation, min_size=1, max_size=2))


@given(system=st.booleans(), task=_observation, turns=st.lists(_turn, min_size=1, max_size=6),
       strategy=st.sampled_from(["summarise", "drop"]))
def test_compactions_keep_the_head_and_the_newest_turn_and_only_shrink(system, task, turns, strategy):
    head = [Message(role="system", content="rules")] * system + [task]
    history = head + [m for assistant, observations in turns for m in (assistant, *observations)]
    newest = [turns[-1][0], *turns[-1][1]]
    views = list(ContextPolicy(strategy=strategy).compactions(history))
    size = len("".join(m.text for m in history))
    for view in views:
        assert view[:len(head)] == head and view[-len(newest):] == newest
        assert len("".join(m.text for m in view)) <= size
        size = len("".join(m.text for m in view))
    if len(turns) > 1:
        assert views[-1] == head + newest  # at the most compact, only the newest turn is left
    else:
        assert views == []
    assert all(m.text.count("\n") == 0 for m in views[-1][len(head):-len(newest)]) if views else True
    assert list(ContextPolicy().compactions(history)) == []
