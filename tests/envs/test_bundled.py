"""Every bundled environment: the conformance checks, the oracle on 200 seeds (40 of a sandboxed one in the
default run), random below it, and fuzzed actions that never raise.

Environments in a real browser, on a desktop in a container or served by an MCP server take seconds to start
each time one is made (or each episode), so the default run checks three of them and fuzzes one per entry point
with one parser (the rest are marked slow), and leaves the oracle and the random policy to their own test
modules."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentgym
from agentgym import OraclePolicy, RandomPolicy, TaskSet
from agentgym.checker import CHECKS
from tests.envs.conftest import IN_SANDBOX, SLOW_TO_START, SPECS, env_param

pytestmark = pytest.mark.usefixtures("env_prerequisites")

BUNDLED = [s.id for s in SPECS]
SEEDS = 200
SANDBOX_SEEDS = 40
"""Seeds of a sandboxed env's oracle test in the default run, every difficulty among them (:data:`SEEDS` of
them take two minutes); ``-m slow`` plays all :data:`SEEDS`."""
CHECKED_BY_DEFAULT = {"web/Shop-v0", "gui/ChooseRadio-v0", "mcp/IssueTracker-v0", "swe/Repos-v0"}
"""Of :data:`SLOW_TO_START`, those the default run checks: a web site, a widget page, the MCP example and a repository
(whose episodes each start a server). A check of one of them takes 15 to 50 s (Gymnasium's checker alone resets 14 times and closes 4 times); ``-m slow`` checks the
rest, and their own modules play their oracle and random policy at every difficulty in the default run."""
PARSERS = ("hermes", "pythonic")
OWN_CHECKS = [name for name in CHECKS if name != "gymnasium"]
"""agentgym's checks; Gymnasium's checker runs on every environment, these included, in the conformance step
(``tests/envs/test_gymnasium_conformance.py``)."""


def _check_params() -> list[object]:
    """Every bundled id; those :data:`SLOW_TO_START` but not :data:`CHECKED_BY_DEFAULT` marked slow."""
    return [env_param(s.id, slow=s.id in SLOW_TO_START - CHECKED_BY_DEFAULT) for s in SPECS]


def _oracle_params() -> list[object]:
    """(id, seeds) of every bundled id but those :data:`SLOW_TO_START` (their own modules play them): with
    :data:`SEEDS`, a sandboxed one with :data:`SANDBOX_SEEDS` and with :data:`SEEDS` marked slow."""
    params = []
    for spec in SPECS:
        if spec.id in SLOW_TO_START:
            continue
        if spec.id in IN_SANDBOX:
            params.append(env_param(spec.id, SANDBOX_SEEDS))
        params.append(env_param(spec.id, SEEDS, slow=spec.id in IN_SANDBOX))
    return params


def _fuzz_params() -> list[object]:
    """(id, parser) of every bundled id with every parser. Of those :data:`SLOW_TO_START`, the default run
    fuzzes the first of each entry point with one parser (taking turns), and the rest are marked slow."""
    params, seen = [], set()
    for spec in SPECS:
        first = spec.id in SLOW_TO_START and spec.entry_point not in seen
        for parser in PARSERS:
            chosen = first and parser == PARSERS[len(seen) % len(PARSERS)]
            params.append(env_param(spec.id, parser, slow=spec.id in SLOW_TO_START and not chosen))
        if spec.id in SLOW_TO_START:
            seen.add(spec.entry_point)
    return params


def test_the_bundled_families_are_registered():
    assert {"games/FrozenLake-v0", "games/Sokoban-v0", "tools/Calculator-v0"} <= set(BUNDLED)


@pytest.mark.parametrize("env_id", _check_params())
def test_check_env_passes(env_id):
    env = agentgym.make(env_id)
    report = agentgym.check_env(env, episodes=1 if env_id in SLOW_TO_START else 3, only=OWN_CHECKS)
    assert [name for name, _ in report.passed] == ["tool_schemas", "determinism", "malformed_actions", "oracle"]
    env.close()


@pytest.mark.parametrize(("env_id", "seeds"), _oracle_params())
def test_oracle_solves_every_seed_and_random_scores_below(env_id, seeds):
    env = agentgym.make(env_id)
    levels = list(env.difficulties)
    env.close()
    tasks = TaskSet.generate(env_id, seeds, split="test", difficulties=levels)
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


@pytest.mark.parametrize(("env_id", "parser"), _fuzz_params())
def test_fuzzed_actions_never_raise(env_id, parser):
    @given(data=st.data())
    @settings(max_examples=4 if env_id in SLOW_TO_START else 20 if env_id in IN_SANDBOX else 60, deadline=None,
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
