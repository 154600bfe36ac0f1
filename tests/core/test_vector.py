"""Gymnasium's vector environments run agentgym environments: batches of text actions in, tuples of messages out."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from gymnasium.spaces import Tuple
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv
from gymnasium.vector.utils import (
    batch_differing_spaces,
    batch_space,
    concatenate,
    create_empty_array,
    iterate,
)

import agentgym
from agentgym import Message
from agentgym.spaces import Messages, Utterance

FROZEN_LAKE = "games/FrozenLake-v0"
SEEDS = [3, 4]
LEFT = '<tool_call>\n{"name": "move", "arguments": {"direction": "left"}}\n</tool_call>'


def single_episode(seed: int, actions: list[str], **kwargs) -> list[tuple]:
    """What one environment answers to ``actions`` from ``reset(seed=seed)``: the reset observation, then each step."""
    env = agentgym.make(FROZEN_LAKE, **kwargs)
    try:
        results: list[tuple] = [env.reset(seed=seed)[0]]
        results += [env.step(action)[:4] for action in actions]
        return results
    finally:
        env.close()


def test_spaces_batch_as_tuples_of_independent_copies():
    batched = batch_space(Utterance(max_length=10, seed=0), 3)
    assert isinstance(batched, Tuple) and batched.spaces == (Utterance(max_length=10),) * 3
    assert len({s.np_random.integers(10**9) for s in batched.spaces}) == 3
    assert batched.contains(("a", "", "0123456789")) and not batched.contains(("a", "", "01234567890"))
    assert batch_space(Utterance(seed=5), 2).sample() == batch_space(Utterance(seed=5), 2).sample()
    assert list(iterate(batched, ("x", "y", "z"))) == ["x", "y", "z"]
    messages = [Message(role="user", content="hi")]
    assert concatenate(Messages(), [messages, []], create_empty_array(Messages(), 2)) == (messages, [])
    assert create_empty_array(Messages(), 2) == ([], []) and create_empty_array(Utterance(), 3) == ("", "", "")
    differing = batch_differing_spaces([Utterance(max_length=4), Utterance(max_length=8)])
    assert [s.max_length for s in differing.spaces] == [4, 8]


def test_sync_vector_env_resets_steps_and_autoresets():
    envs = SyncVectorEnv([partial(agentgym.make, FROZEN_LAKE, max_turns=2) for _ in SEEDS])
    try:
        assert envs.single_action_space == Utterance() and envs.single_observation_space == Messages()
        observations, infos = envs.reset(seed=SEEDS)
        assert isinstance(observations, tuple) and len(observations) == 2
        assert list(infos["max_turns"]) == [2, 2]
        actions = (LEFT, "no call here")
        steps = [envs.step(actions) for _ in range(2)]
        for i, seed in enumerate(SEEDS):
            expected = single_episode(seed, [actions[i]] * 2, max_turns=2)
            assert observations[i] == expected[0]
            for (obs, rewards, terminated, truncated, _), (e_obs, e_reward, e_term, e_trunc) in zip(steps, expected[1:]):
                assert obs[i] == e_obs and rewards[i] == e_reward
                assert (terminated[i], truncated[i]) == (e_term, e_trunc)
        _, _, terminated, truncated, infos = steps[0]
        assert infos["action_error"][0] is None and "no tool call found" in infos["action_error"][1]
        assert not terminated.any() and not truncated.any()
        assert all(terminated | steps[1][3])  # the turn limit of 2 ends every episode

        observations, rewards, terminated, truncated, _ = envs.step(actions)  # next-step autoreset
        assert all(obs[0].role == "system" and len(obs) == 2 for obs in observations)
        assert rewards.tolist() == [0.0, 0.0] and not terminated.any() and not truncated.any()
        observations, *_ = envs.step(actions)
        assert observations[0][0].role == "tool" and "no tool call found" in observations[1][0].text
    finally:
        envs.close()


def test_async_vector_env_matches_single_environments():
    envs = AsyncVectorEnv([partial(agentgym.make, FROZEN_LAKE) for _ in SEEDS], shared_memory=False)
    try:
        observations, _ = envs.reset(seed=SEEDS)
        next_observations, rewards, _terminated, _truncated, infos = envs.step((LEFT, LEFT))
        for i, seed in enumerate(SEEDS):
            expected = single_episode(seed, [LEFT])
            assert observations[i] == expected[0]
            assert next_observations[i] == expected[1][0] and rewards[i] == expected[1][1]
        assert isinstance(rewards, np.ndarray) and list(infos["turn"]) == [1, 1]
    finally:
        envs.close()


def test_async_vector_env_needs_shared_memory_off():
    with pytest.raises(ValueError, match="shared_memory=False"):
        AsyncVectorEnv([partial(agentgym.make, FROZEN_LAKE)])
