"""Model-backed rollout on the real torch engine: token-in/token-out, faults, and weight updates mid-rollout."""

from __future__ import annotations

import asyncio

import pytest
import torch

from agentgym import Task, TaskSet
from agentgym.episode import Timeouts, run_episode
from agentgym.inference import GenerationRequest, SamplingParams
from agentgym.inference.torch.engine import TorchEngine
from agentgym.policies.lm import LMPolicy
from agentgym.registration import make
from agentgym.rollout import RolloutConfig, RolloutScheduler
from tests.rollout.streams import delivered

FAST = SamplingParams(max_tokens=12)


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    engine = TorchEngine(tiny_model_dir, seed=0)
    yield engine
    asyncio.run(engine.close())


def test_trajectory_ids_are_the_conversation_token_in_token_out(engine):
    policy = LMPolicy(engine, FAST)
    env = make("games/FrozenLake-v0", max_turns=4)
    task = Task(env_id="games/FrozenLake-v0", seed=5)
    trajectory = asyncio.run(run_episode(env, policy, task))
    env.close()
    assert trajectory.status in ("ok", "truncated") and trajectory.num_turns >= 2

    last_assistant = max(i for i, m in enumerate(trajectory.messages) if m.role == "assistant")
    conversation = [m.to_openai() for m in trajectory.messages[: last_assistant + 1]]
    fresh = policy.renderer.render(conversation, [t.to_openai() for t in env.tools])
    assert engine.tokenizer.decode(trajectory.token_ids, skip_special_tokens=False) == fresh

    # what the engine saw at each turn is a prefix of what it saw next; generated tokens follow each prompt
    seen = trajectory.info["prompt_lengths"]
    assert seen == sorted(seen) and len(seen) == trajectory.num_turns
    mask = trajectory.loss_mask
    for start, end in zip(seen, seen[1:] + [len(mask)]):
        assert mask[start] == 1 and mask[start - 1] == 0
        generated = mask[start:end]
        assert generated == sorted(generated, reverse=True)  # the response, then masked-out env tokens
    assert all(lp <= 0 and v == 0 for lp, v, m in zip(trajectory.logprobs, trajectory.versions, mask) if m)
    assert all(lp == 0 and v == -1 for lp, v, m in zip(trajectory.logprobs, trajectory.versions, mask) if not m)
    assert [t.action for t in trajectory.turns] == [m.text for m in trajectory.messages if m.role == "assistant"]


def test_behaviour_logprobs_match_a_fresh_forward_pass(engine):
    policy = LMPolicy(engine, SamplingParams(max_tokens=12, temperature=0.7, top_p=0.9))
    env = make("tools/Calculator-v0", max_turns=2)
    trajectory = asyncio.run(run_episode(env, policy, Task(env_id="tools/Calculator-v0", seed=1)))
    env.close()
    from agentgym.inference.sampling import token_logprobs

    ids = torch.tensor([trajectory.token_ids])
    with torch.no_grad():
        logits = engine.model(ids).logits[0, :-1]
    scored = token_logprobs(logits, ids[0, 1:], 0.7, 0.9)
    generated = [i for i, m in enumerate(trajectory.loss_mask) if m]
    expected = torch.tensor([trajectory.logprobs[i] for i in generated])
    assert torch.allclose(scored[[i - 1 for i in generated]], expected, atol=1e-4)


class FlakyEngine:
    """The real engine behind a fault injector: some requests fail like a dead inference server."""

    def __init__(self, engine: TorchEngine, every: int) -> None:
        self.inner, self.every, self.calls = engine, every, 0
        self.name, self.tokenizer = engine.name, engine.tokenizer

    @property
    def version(self) -> int:
        return self.inner.version

    def stats(self):
        return self.inner.stats()

    async def generate(self, request: GenerationRequest):
        self.calls += 1
        if self.calls % self.every == 0:
            raise ConnectionResetError("inference server connection reset")
        return await self.inner.generate(request)


def test_failing_engine_requests_become_counted_errors(engine):
    policy = LMPolicy(FlakyEngine(engine, every=5), FAST)
    tasks = TaskSet.generate("tools/Calculator-v0", 12)
    config = RolloutConfig(concurrency=6, max_retries=1, timeouts=Timeouts(episode=120, turn=60, tool=10))
    scheduler = RolloutScheduler("tools/Calculator-v0", policy, config, env_kwargs={"max_turns": 3})
    seen = asyncio.run(asyncio.wait_for(delivered(scheduler, tasks), timeout=120))
    m = scheduler.metrics
    errors = [t for t in seen if t.status == "error"]
    assert errors and {t.info["error_cause"] for t in errors} == {"policy:ConnectionResetError"}
    assert m.errored == len(errors) and m.error_causes == {"policy:ConnectionResetError": len(errors)}
    assert m.finished + m.groups_failed == 12 and m.accounted
    assert all(t.token_ids and t.num_turns >= 1 for t in seen if t.status != "error")
    assert m.engine_busy is not None and 0 < m.engine_busy <= 1.0


def _rollout_across_an_update(model_dir, max_staleness: int | None) -> tuple[list, object, TorchEngine]:
    """Eight FrozenLake episodes; after 100 generated tokens the weights change (version 0 -> 1)."""
    engine = TorchEngine(model_dir, seed=1)
    policy = LMPolicy(engine, SamplingParams(max_tokens=48))
    tasks = TaskSet.generate("games/FrozenLake-v0", 8)
    config = RolloutConfig(concurrency=8, max_staleness=max_staleness, max_retries=3)
    scheduler = RolloutScheduler("games/FrozenLake-v0", policy, config, env_kwargs={"max_turns": 3})
    new_weights = {k: v + 0.01 * torch.randn_like(v) for k, v in engine.model.state_dict().items()}

    async def main() -> list:
        async def trainer() -> None:
            while engine.stats().generated_tokens < 100:
                await asyncio.sleep(0.01)
            await engine.update_weights(new_weights)
            scheduler.notify()

        async with asyncio.TaskGroup() as group:
            group.create_task(trainer())
            seen = await delivered(scheduler, tasks)
        await engine.close()
        return seen

    return asyncio.run(asyncio.wait_for(main(), timeout=240)), scheduler.metrics, engine


def test_weight_update_mid_rollout_tags_tokens_with_their_version(tiny_model_dir):
    seen, m, engine = _rollout_across_an_update(tiny_model_dir, max_staleness=None)
    assert engine.version == 1 and engine.stats().interrupted > 0
    mixed = [t for t in seen if {0, 1} <= set(t.versions)]
    assert mixed and m.dropped == 0 and m.accounted
    for t in mixed:
        generated = [v for v in t.versions if v >= 0]
        assert generated == sorted(generated)  # old tokens first, then the new weights' tokens
    # at least one response was interrupted part-way: one turn's tokens carry both versions
    turns = [t.versions[a:b] for t in mixed for a, b in zip(t.info["prompt_lengths"], t.info["prompt_lengths"][1:] + [len(t.versions)])]
    assert any({0, 1} <= set(v) for v in turns)
    assert m.staleness.get(1, 0) == len(mixed)


def test_staleness_bound_drops_what_the_update_made_stale(tiny_model_dir):
    seen, m, engine = _rollout_across_an_update(tiny_model_dir, max_staleness=0)
    assert engine.version == 1 and m.dropped > 0 and m.accounted and m.retried >= m.dropped
    kept = [t for t in seen if t.status != "error"]
    assert all({v for v in t.versions if v >= 0} == {1} for t in kept)  # only new-weight tokens kept
    assert m.staleness == {0: m.finished}


def test_engine_shut_down_mid_rollout_ends_every_episode_as_an_error(tiny_model_dir):
    engine = TorchEngine(tiny_model_dir, seed=2)
    policy = LMPolicy(engine, SamplingParams(max_tokens=32))
    config = RolloutConfig(concurrency=8, max_retries=1)
    scheduler = RolloutScheduler("games/FrozenLake-v0", policy, config, env_kwargs={"max_turns": 6})

    async def main() -> list:
        async def crash() -> None:
            while engine.stats().generated_tokens < 50:
                await asyncio.sleep(0.01)
            await engine.close()

        async with asyncio.TaskGroup() as group:
            group.create_task(crash())
            return await delivered(scheduler, TaskSet.generate("games/FrozenLake-v0", 12))

    seen = asyncio.run(asyncio.wait_for(main(), timeout=120))
    m = scheduler.metrics
    assert m.accounted and m.errored > 0 and m.groups_failed + m.groups_complete == 12
    causes = set(m.error_causes)
    assert causes <= {"policy:EngineAborted", "policy:RuntimeError"}, causes
    assert all("engine" in t.error for t in seen if t.status == "error")
