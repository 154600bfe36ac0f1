"""The base environment: tool dispatch, error observations, turn limits, sync and async paths."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentgym import Env, Message, ResetNeeded, tool
from tests.conftest import CounterEnv


def test_oracle_solves_and_reward_arrives_on_the_final_step(counter_env):
    observation, info = counter_env.reset(seed=3)
    assert observation[0].role == "user" and info["tools"] == ["add", "wait", "boom"]
    rewards = []
    while True:
        _, reward, terminated, truncated, info = counter_env.step(counter_env.oracle_action())
        rewards.append(reward)
        if terminated or truncated:
            break
    assert terminated and not truncated and info["success"] is True
    assert rewards[-1] == 1.0 and sum(rewards) == 1.0


def test_malformed_actions_become_error_observations(counter_env):
    counter_env.reset(seed=0)
    cases = {
        "hello": "no tool call found",
        "<tool_call>{oops</tool_call>": "not valid JSON",
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>': "unknown tool 'nope'",
        '<tool_call>{"name": "add", "arguments": {"amount": "lots"}}</tool_call>': "'amount' input should be a valid integer",
        '<tool_call>{"name": "add", "arguments": {}}</tool_call>': "missing argument 'amount'",
        '<tool_call>{"name": "add", "arguments": {"amount": 1, "x": 2}}</tool_call>': "unexpected argument 'x'",
        '<tool_call>{"name": "add", "arguments": {"amount": 500}}</tool_call>': "between 1 and 100",
    }
    for action, expected in cases.items():
        observation, reward, terminated, truncated, info = counter_env.step(action)
        assert expected in info["action_error"], (action, info["action_error"])
        assert expected in observation[-1].text and observation[-1].text.startswith("Error: ")
        assert reward == 0.0 and not terminated
        if truncated:
            counter_env.reset(seed=0)


def test_a_valid_call_next_to_an_invalid_one_still_runs(counter_env):
    counter_env.reset(seed=0)
    action = (
        '<tool_call>{"name": "add", "arguments": {"amount": 1}}</tool_call>'
        '<tool_call>{"name": "add", "arguments": {"amount": "x"}}</tool_call>'
    )
    observation, _, _, _, info = counter_env.step(action)
    assert [m.tool_call_id for m in observation] == ["call_1_0", "call_1_1"]
    assert observation[0].text == "total = 1" and "amount" in info["action_error"]
    assert [c.name for c in info["tool_calls"]] == ["add", "add"]


def test_turn_limit_truncates_and_then_reset_is_needed(counter_env):
    counter_env.reset(seed=0)
    flags = [counter_env.step("nothing")[2:4] for _ in range(CounterEnv.default_max_turns)]
    assert flags[-1] == (False, True) and all(f == (False, False) for f in flags[:-1])
    with pytest.raises(ResetNeeded):
        counter_env.step("nothing")


def test_step_before_reset_raises(counter_env):
    with pytest.raises(ResetNeeded):
        counter_env.step("x")


def test_infrastructure_errors_raise_instead_of_becoming_observations(counter_env):
    counter_env.reset(seed=0)
    with pytest.raises(RuntimeError, match="container died"):
        counter_env.step('<tool_call>{"name": "boom", "arguments": {}}</tool_call>')


def test_async_tool_and_async_api():
    async def main():
        env = CounterEnv(parser="pythonic")
        try:
            await env.areset(seed=1)
            observation, *_ = await env.astep("wait(seconds=0.01)")
            return observation[0].text
        finally:
            env.close()

    assert asyncio.run(main()) == "waited"


def test_sync_api_works_inside_a_running_event_loop(counter_env):
    async def inside_loop():
        counter_env.reset(seed=2)
        return counter_env.step(counter_env.oracle_action())[0][0].text

    assert asyncio.run(inside_loop()).startswith("total = ")


def test_same_seed_same_episode_and_difficulty_option(counter_env):
    first, _ = counter_env.reset(seed=42)
    second, _ = counter_env.reset(seed=42)
    hard, info = counter_env.reset(seed=42, options={"difficulty": "hard"})
    assert first == second and info["difficulty"] == "hard"
    assert int(hard[0].text.split()[-1].rstrip(".")) == 10 * int(first[0].text.split()[-1].rstrip("."))
    with pytest.raises(ValueError, match="choose one of: easy, hard"):
        counter_env.reset(options={"difficulty": "impossible"})


def test_max_tool_calls_refuses_the_rest():
    class OneCall(CounterEnv):
        max_tool_calls = 1

    env = OneCall(parser="pythonic")
    env.reset(seed=0)
    observation, _, _, _, info = env.step("add(amount=1)\nadd(amount=1)")
    assert observation[0].text == "total = 1" and "only 1 tool call" in info["action_error"]
    env.close()


def test_pinned_execution_runs_hooks_on_one_thread():
    class Pinned(Env):
        execution = "pinned"

        def setup(self, difficulty, options):
            self.threads = {threading.get_ident()}
            return [Message(role="user", content="go")]

        @tool
        def ping(self) -> str:
            """Record the thread."""
            self.threads.add(threading.get_ident())
            return "pong"

    async def main():
        env = Pinned()
        await env.areset(seed=0)
        for _ in range(5):
            await env.astep('<tool_call>{"name": "ping", "arguments": {}}</tool_call>')
        env.close()
        env.close()  # idempotent
        return env.threads

    threads = asyncio.run(main())
    assert len(threads) == 1 and threading.get_ident() not in threads


def test_action_over_the_size_limit_is_refused_unread():
    env = CounterEnv(max_action_chars=100)
    env.reset(seed=0)
    _observation, *_, info = env.step('<tool_call>{"name": "add", "arguments": {"amount": 1}}</tool_call>' + " " * 100)
    assert "too long" in info["action_error"] and info["tool_calls"] == []
    env.close()


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="unknown tool-call format"):
        CounterEnv(parser="xml")
    with pytest.raises(ValueError, match="max_turns"):
        CounterEnv(max_turns=0)
    with pytest.raises(ValueError, match="render_mode"):
        CounterEnv(render_mode="human")
