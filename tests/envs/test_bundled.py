"""Every bundled environment: the conformance checks, the oracle on 200 seeds, random below it,
and fuzzed actions that never raise. Environments in a real browser take more than a second an episode, so
they play fewer seeds and fuzzed examples here; their own tests play every task (marked slow)."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentgym
from agentgym import OraclePolicy, RandomPolicy, TaskSet

BUNDLED = [s.id for s in agentgym.list_envs() if s.entry_point.startswith("agentgym.envs.")]
IN_BROWSER = {s.id for s in agentgym.list_envs() if "browser" in s.tags}


def test_the_bundled_families_are_registered():
    assert {"games/FrozenLake-v0", "games/Sokoban-v0", "tools/Calculator-v0"} <= set(BUNDLED)


@pytest.mark.parametrize("env_id", BUNDLED)
def test_check_env_passes(env_id):
    env = agentgym.make(env_id)
    report = agentgym.check_env(env, episodes=3)
    assert [name for name, _ in report.passed] == ["gymnasium", "tool_schemas", "determinism", "malformed_actions", "oracle"]
    env.close()


@pytest.mark.parametrize("env_id", BUNDLED)
def test_oracle_solves_200_seeds_and_random_scores_below(env_id):
    env = agentgym.make(env_id)
    levels = list(env.difficulties)
    env.close()
    tasks = TaskSet.generate(env_id, 12 if env_id in IN_BROWSER else 200, split="test", difficulties=levels)
    oracle = asyncio.run(agentgym.evaluate(env_id, OraclePolicy(), tasks))
    random = asyncio.run(agentgym.evaluate(env_id, RandomPolicy(), tasks))
    assert oracle.summary.success_rate == 1.0 and oracle.summary.infra_errors == 0
    assert random.summary.infra_errors == 0
    assert random.summary.success_rate < 0.5 and random.summary.mean_reward < oracle.summary.mean_reward


def _call(name: str, arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50)
actions = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.builds(lambda s: "<tool_call>" + s, st.text(max_size=100)),
    st.builds(_call, st.sampled_from(["move", "calculator", "answer", "nope", ""]),
              st.dictionaries(st.sampled_from(["direction", "expression", "value", "x"]), scalars | st.lists(scalars), max_size=3)),
    st.builds(lambda name, args: f"{name}({args})", st.sampled_from(["move", "calculator", "answer"]), st.text(max_size=80)),
    st.integers(10_000, 100_000).map(lambda n: "(" * n),
    st.integers(1, 50).map(lambda n: _call("move", {"direction": "up"}) * n),
)


@pytest.mark.parametrize("env_id", BUNDLED)
@pytest.mark.parametrize("parser", ["hermes", "pythonic"])
def test_fuzzed_actions_never_raise(env_id, parser):
    @given(data=st.data())
    @settings(max_examples=4 if env_id in IN_BROWSER else 60, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    def fuzz(data):
        env = agentgym.make(env_id, parser=parser)
        try:
            env.reset(seed=data.draw(st.integers(0, 10**6)))
            for action in data.draw(st.lists(actions, min_size=1, max_size=4)):
                observation, reward, terminated, truncated, info = env.step(action)
                assert env.observation_space.contains(observation) and isinstance(reward, float)
                if info["action_error"] is not None:
                    assert observation and observation[-1].text
                if terminated or truncated:
                    break
        finally:
            env.close()  # also when hypothesis abandons an example part-way

    fuzz()
