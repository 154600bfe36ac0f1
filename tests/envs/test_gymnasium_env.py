"""Gymnasium's own environments played as text through ``make("gymnasium:<id>")``: Gymnasium's rewards and
flags step for step, readable pictures, clear refusals, and the planning oracle on the toy-text classics."""

from __future__ import annotations

import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from gymnasium.utils import seeding

import agentgym
from agentgym.checker import run_checks
from agentgym.envs.gymnasium.env import DEFAULT_TURNS
from agentgym.errors import UnknownEnvError

CLASSICS = ["FrozenLake-v1", "Taxi-v4", "CliffWalking-v1", "Blackjack-v1"]
PLANNABLE = {"FrozenLake-v1": {"is_slippery": False}, "Taxi-v4": {}, "CliffWalking-v1": {}}


def _make(gym_id: str, **gym_kwargs):
    return agentgym.make(f"gymnasium:{gym_id}", parser="pythonic", gym_kwargs=gym_kwargs)


@pytest.mark.parametrize("gym_id", CLASSICS)
def test_rewards_and_flags_are_gymnasiums_step_for_step(gym_id):
    """A random walk through the adapter and through Gymnasium itself, from the seed the adapter hands on."""
    env, raw = _make(gym_id), gymnasium.make(gym_id)
    assert env.reset(seed=0)[1]["max_turns"] == (gymnasium.spec(gym_id).max_episode_steps or DEFAULT_TURNS)
    rng = np.random.default_rng(7)
    for seed in range(3):
        limit = env.reset(seed=seed)[1]["max_turns"]  # Gymnasium's max_episode_steps, where it has one
        raw.reset(seed=int(seeding.np_random(seed)[0].integers(2**31)))
        names = env.tools[0].parameters["properties"]["action"]["enum"]
        terminated = truncated = False
        while not (terminated or truncated):
            index = int(rng.integers(len(names)))
            _, reward, terminated, truncated, info = env.step(f"act(action='{names[index]}')")
            _, raw_reward, raw_terminated, raw_truncated, _ = raw.step(index)
            assert info["action_error"] is None
            assert (reward, terminated) == (float(raw_reward), raw_terminated)
            assert truncated == (not terminated and env.turn == limit) and (truncated or not raw_truncated)
        if terminated and gym_id in ("FrozenLake-v1", "Blackjack-v1"):
            assert info["success"] == (reward > 0)
    env.close()


@pytest.mark.parametrize("gym_id", list(PLANNABLE))
def test_the_classics_pass_the_env_checker_and_the_planning_oracle_solves_them(gym_id):
    env = _make(gym_id, **PLANNABLE[gym_id])
    report = agentgym.check_env(env, episodes=5)
    assert {name for name, _ in report.passed} >= {"gymnasium", "determinism", "malformed_actions", "oracle"}
    env.close()


def test_the_oracle_walks_the_cliffs_shortest_safe_path_and_the_taxi_earns_its_fare():
    cliff = _make("CliffWalking-v1")
    cliff.reset(seed=0)
    total, done = 0.0, False
    while not done:
        _, reward, done, truncated, info = cliff.step(cliff.oracle_action())
        total += reward
        assert not truncated
    assert total == -13.0 and info["success"]  # up, eleven steps right, down: no shorter way around the cliff
    taxi = _make("Taxi-v4")
    for seed in range(5):
        taxi.reset(seed=seed)
        rewards, done = [], False
        while not done:
            _, reward, done, _, info = taxi.step(taxi.oracle_action())
            rewards.append(reward)
        assert info["success"] and rewards[-1] == 20.0 and set(rewards[:-1]) == {-1.0} and len(rewards) <= 20


def test_blackjack_without_a_text_rendering_names_the_observations_parts_and_has_no_oracle():
    env = _make("Blackjack-v1")
    observation, _ = env.reset(seed=1)
    mine, dealer, ace = gymnasium.make("Blackjack-v1").reset(seed=int(seeding.np_random(1)[0].integers(2**31)))[0]
    assert observation[1].content == f"Your sum: {mine}. Dealer's card: {dealer}. Usable ace: {ace}."
    report = run_checks(env)
    assert {name for name, _ in report.passed} >= {"gymnasium", "tool_schemas", "malformed_actions"}
    with pytest.raises(NotImplementedError, match="no transition table"):
        env.oracle_action()


def test_the_picture_marks_in_brackets_what_gymnasium_colours():
    lake = _make("FrozenLake-v1", is_slippery=False)
    observation, _ = lake.reset(seed=0)
    assert observation[1].content == "[S]FFF\nFHFH\nFFFH\nHFFG"
    taxi = _make("Taxi-v4")
    text = taxi.reset(seed=3)[0][1].content
    assert "\x1b" not in text and text.count("[ ]") == 1 and text.count("*") == 2 and text.count("<") == 1
    while "{" not in text:  # the passenger boards: the taxi's mark changes
        text = taxi.step(taxi.oracle_action())[0][0].content
    assert "*" not in text and text.count("{") == 1


def test_a_bad_action_is_an_error_observation_and_the_episode_goes_on():
    env = _make("Taxi-v4")
    before = env.reset(seed=0)[0][1].content
    observation, reward, terminated, truncated, info = env.step("act(action='fly')")
    assert "south, north, east, west, pickup or dropoff" in observation[0].content.replace("'", "")
    assert info["action_error"] and reward == 0.0 and not (terminated or truncated)
    assert env.render_text() == before  # nothing was stepped


def test_unknown_deprecated_and_continuous_ids_are_refused_with_the_reason():
    with pytest.raises(UnknownEnvError, match="Taxi-v4"):
        agentgym.make("gymnasium:Taxi-v3")
    with pytest.raises(UnknownEnvError, match="doesn't exist"):
        agentgym.make("gymnasium/NoSuchGame-v0")
    with pytest.raises(ValueError, match="only Discrete"):
        agentgym.make("gymnasium:Pendulum-v1")


def test_a_fresh_process_makes_the_slash_id_with_nothing_registered_before():
    """An env worker (a Ray actor, an eval subprocess) gets only the id: the slash form registers itself."""
    code = ("import agentgym; env = agentgym.make('gymnasium/CliffWalking-v1'); env.reset(seed=0); "
            "print(env.spec.id, env.spec.kwargs['gym_id'], env.step(env.oracle_action())[1])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["gymnasium/CliffWalking-v1", "CliffWalking-v1", "-1.0"]


def test_agentgym_list_shows_gymnasiums_classics_beside_the_other_adapted_families():
    listed = {spec.id.split("/")[0]: spec.id for spec in agentgym.list_envs()}
    assert {"gymnasium", "textarena", "miniwob", "mcp"} <= set(listed)
    assert {s.id for s in agentgym.list_envs(family="gymnasium")} >= {
        "gymnasium/Taxi-v4", "gymnasium/FrozenLake-v1", "gymnasium/CliffWalking-v1", "gymnasium/Blackjack-v1"}
