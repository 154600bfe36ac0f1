"""Forking episodes (``agentgym.episode_fork``): every bundled environment that declares itself forkable gives a
child, forked at a middle turn, that sees what the parent saw next and then steps on its own; a replay that
diverges is refused naming the turn, and an environment declaring ``forkable = "no"`` is refused naming why.

Each environment plays a scout episode (the oracle's actions, else random ones) to find a turn before the end,
then a parent to that turn, then the child. Environments slow to start (a browser, a desktop, an MCP server)
fork one per entry point in the default run and the rest with ``-m slow``, as in ``test_bundled``."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import numpy as np
import pytest

import agentgym
from agentgym import Env, ForkError, Message, ReplayDiverged, afork_episode, fork_episode, tool
from agentgym.registration import _registry
from tests.conftest import CounterEnv
from tests.envs.conftest import ALL_SPECS, SLOW_TO_START, env_param

pytestmark = pytest.mark.usefixtures("env_prerequisites")

SEED = 3
SCOUT_TURNS = 4
FORK_AT = 2
"""The turn the child is forked after, or the last before the scout's episode ended if that came sooner."""
CHILD_TURNS = 2
"""Random steps the child takes on its own before the parent takes its next one."""
FORKABLE = [s for s in ALL_SPECS if s.load().forkable != "no"]
FORKED_BY_DEFAULT = {"web/Shop-v0", "gui/ChooseRadio-v0", "gui/DesktopAddLines-v0", "mcp/IssueTracker-v0",
                     "swe/Repos-v0"}
"""Of :data:`SLOW_TO_START`, those the default run forks (4 to 13 s each): a web site, a widget page, a desktop,
the MCP example and a repository; ``-m slow`` forks the rest."""


def _fork_params() -> list[object]:
    """Every forkable shipped id; those :data:`SLOW_TO_START` but not :data:`FORKED_BY_DEFAULT` marked slow."""
    return [env_param(s.id, slow=s.id in SLOW_TO_START - FORKED_BY_DEFAULT) for s in FORKABLE]


def _next_action(env: Env, rng: np.random.Generator) -> str:
    """The oracle's action, or a random one where there is no oracle."""
    try:
        return env.oracle_action()
    except NotImplementedError:
        return env.random_action(rng)


def _scout(env_id: str) -> tuple[list[str], list[tuple[Any, ...]], list[Message]]:
    """Actions and step results (observation, reward, terminated, truncated) of up to :data:`SCOUT_TURNS` turns,
    and the reset's observation."""
    env = agentgym.make(env_id)
    try:
        opening, _ = env.reset(seed=SEED)
        rng = np.random.default_rng(SEED)
        actions, results = [], []
        for _ in range(SCOUT_TURNS):
            actions.append(_next_action(env, rng))
            observation, reward, terminated, truncated, _ = env.step(actions[-1])
            results.append((observation, reward, terminated, truncated))
            if terminated or truncated:
                break
        return actions, results, opening
    finally:
        env.close()


def test_every_bundled_family_declares_how_it_forks():
    declared: dict[str, set[str]] = {}
    for spec in ALL_SPECS:
        declared.setdefault(spec.family, set()).add(spec.load().forkable)
    expected = {"games": {"native"}, "tools": {"native", "replay"}, "textarena": {"replay"}, "gymnasium": {"replay"},
                "web": {"replay"}, "gui": {"replay"}, "mcp": {"replay"}, "swe": {"replay"}, "miniwob": {"no"}}
    assert declared == {family: kinds for family, kinds in expected.items() if family in declared}  # miniwob may be missing


@pytest.mark.parametrize("env_id", _fork_params())
def test_a_forked_child_sees_what_the_parent_saw_next_and_steps_on_its_own(env_id):
    if (reason := agentgym.spec(env_id).unavailable) is not None:
        pytest.skip(reason)
    actions, results, opening = _scout(env_id)
    turn = min(FORK_AT, len(actions) - 1)
    parent = agentgym.make(env_id)
    child: Env | None = None
    try:
        observations = [parent.reset(seed=SEED)[0]]
        for action in actions[:turn]:
            observations.append(parent.step(action)[0])
        assert observations == [opening, *(result[0] for result in results[:turn])]
        child = fork_episode(parent, seed=SEED, actions=actions[:turn], observations=observations)
        assert child is not parent and child.turn == turn

        result = child.step(actions[turn])[:4]
        assert result == results[turn]
        before = (parent.turn, parent.render_text())
        rng = np.random.default_rng(SEED + 1)
        for _ in range(CHILD_TURNS if result[2:] == (False, False) else 0):
            if child.step(child.random_action(rng))[2:4] != (False, False):
                break
        assert (parent.turn, parent.render_text()) == before
        assert parent.step(actions[turn])[:4] == results[turn]
    finally:
        parent.close()
        if child is not None:
            child.close()


def test_a_native_fork_carries_the_random_generator():
    parent = agentgym.make("games/FrozenLake-v0", slippery=True)
    parent.reset(seed=SEED)
    child = parent.fork()
    moves = [parent.format_call("move", direction=d) for d in ("down", "right", "up", "left", "down")]
    for move in moves:
        parent_result, child_result = parent.step(move), child.step(move)
        assert child_result[:4] == parent_result[:4]
        if parent_result[2] or parent_result[3]:
            break


def test_a_native_parent_past_the_fork_turn_is_replayed():
    parent = agentgym.make("games/Sokoban-v0")
    observations = [parent.reset(seed=SEED)[0]]
    actions = [parent.oracle_action()]
    observations.append(parent.step(actions[0])[0])
    parent.step(parent.oracle_action())
    child = fork_episode(parent, seed=SEED, actions=actions, observations=observations)
    assert (child.turn, parent.turn) == (1, 2)
    assert child.render_text() != parent.render_text()


def test_a_parent_not_made_from_an_id_is_copied_only_natively():
    parent = CounterEnv()
    observations = [parent.reset(seed=SEED)[0]]
    with pytest.raises(ForkError, match="not made from a registered id"):
        fork_episode(parent, seed=SEED, actions=[], observations=observations)


def test_a_replay_from_an_id_or_a_builder_and_on_the_event_loop():
    actions, results, opening = _scout("tools/Calculator-v0")
    history = {"seed": SEED, "actions": actions[:1], "observations": [opening, results[0][0]]}
    from_id = fork_episode("tools/Calculator-v0", **history)
    from_builder = fork_episode(lambda: agentgym.make("tools/Calculator-v0"), **history)
    on_the_loop = asyncio.run(afork_episode("tools/Calculator-v0", **history))
    for child in (from_id, from_builder, on_the_loop):
        assert child.turn == 1
        assert child.step(actions[1])[:4] == results[1]
        child.close()


def test_a_history_must_hold_one_observation_more_than_actions():
    with pytest.raises(ValueError, match="one observation more than actions"):
        fork_episode("tools/Calculator-v0", seed=SEED, actions=["x"], observations=[[]])


class DriftingEnv(Env):
    """Deliberately broken: from an episode's second call on, ``tick`` shows how often it ran in the process,
    a count no reset sets back."""

    ticks = 0

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.calls = 0
        return [Message(role="user", content="Call tick.")]

    @tool
    def tick(self) -> str:
        """Count a tick."""
        DriftingEnv.ticks += 1
        self.calls += 1
        return "tick" if self.calls == 1 else f"tick {DriftingEnv.ticks}"


class Unforkable(CounterEnv):
    """Declares that it cannot be forked."""

    forkable = "no"
    unforkable_reason = "its counter lives on a remote server"


@pytest.fixture
def registered():
    """Registers test environments under ``test/...`` ids for one test; the registry forgets them after."""
    ids: list[str] = []

    def register(env_id: str, entry_point: str, **kwargs: Any) -> str:
        agentgym.register(env_id, entry_point, **kwargs)
        ids.append(env_id)
        return env_id

    yield register
    for env_id in ids:
        _registry.pop(env_id, None)


def test_a_replay_that_diverges_is_refused_naming_the_env_and_the_turn(registered):
    env_id = registered("test/Drifting-v0", f"{__name__}:DriftingEnv")
    parent = agentgym.make(env_id)
    observations = [parent.reset(seed=SEED)[0]]
    actions = [parent.format_call("tick")] * 3
    observations += [parent.step(action)[0] for action in actions]
    with pytest.raises(ReplayDiverged, match=r"replaying test/Drifting-v0 diverged .* at turn 2:") as caught:
        fork_episode(parent, seed=SEED, actions=actions, observations=observations)
    assert caught.value.turn == 2 and caught.value.env_id == env_id
    assert re.search(r"^-\[tool\] tick \d+\n\+\[tool\] tick \d+$", str(caught.value), re.MULTILINE)
    parent.close()


def test_an_env_that_declares_it_cannot_fork_is_refused_with_its_reason(registered):
    env_id = registered("test/Unforkable-v0", f"{__name__}:Unforkable")
    with pytest.raises(ForkError, match="test/Unforkable-v0 cannot be forked .*: its counter lives on a remote server"):
        fork_episode(env_id, seed=SEED, actions=[], observations=[[]])
    with pytest.raises(NotImplementedError, match="forkable='no'"):
        Unforkable().fork()


def test_an_env_registered_as_nondeterministic_is_refused(registered):
    env_id = registered("test/Nondeterministic-v0", "tests.conftest:CounterEnv", nondeterministic=True)
    with pytest.raises(ForkError, match="registered as nondeterministic"):
        fork_episode(env_id, seed=SEED, actions=[], observations=[[]])


def test_miniwob_tasks_are_refused_for_their_clock():
    miniwob = [s for s in ALL_SPECS if s.family == "miniwob"]
    if not miniwob:
        pytest.skip("the miniwob family is not registered here")
    with pytest.raises(ForkError, match="wall time"):
        fork_episode(miniwob[0].id, seed=SEED, actions=[], observations=[[]])
