"""Episodes and evaluation: scores, infrastructure errors kept apart, timeouts, saved results."""

from __future__ import annotations

import asyncio

import numpy as np

import agentgym
from agentgym import OraclePolicy, RandomPolicy, TaskSet, run_episode
from agentgym.episode import Timeouts
from agentgym.policies import TextPolicy
from tests.conftest import CounterEnv


class Crashy(TextPolicy):
    """A policy that makes the environment crash on every third task seed, and hangs on another."""

    name = "crashy"

    async def act(self, env, messages, rng: np.random.Generator) -> str:
        seed = env.np_random_seed
        if seed % 3 == 0:
            return '<tool_call>{"name": "boom", "arguments": {}}</tool_call>'
        if seed % 3 == 1:
            await asyncio.sleep(10)
        return env.oracle_action()


def test_oracle_episode_is_recorded_turn_by_turn():
    env = CounterEnv()
    task = agentgym.Task(env_id="test/Counter-v0", seed=4, difficulty="hard")
    trajectory = asyncio.run(run_episode(env, OraclePolicy(), task))
    assert trajectory.status == "ok" and trajectory.success and trajectory.reward == 1.0
    roles = [m.role for m in trajectory.messages]
    assert roles[0] == "user" and roles[1::2] == ["assistant"] * trajectory.num_turns
    assert all(turn.tool_calls and turn.tool_calls[0].name == "add" for turn in trajectory.turns)
    env.close()


def test_infrastructure_errors_and_timeouts_are_errors_not_scores(registered_counter):
    tasks = TaskSet.generate("test/Counter-v0", 9)
    timeouts = Timeouts(episode=0.5, turn=0.3, tool=0.2)
    result = asyncio.run(agentgym.evaluate("test/Counter-v0", Crashy(), tasks, concurrency=4, timeouts=timeouts))
    by_seed = {t.task.seed: t for t in result.trajectories}
    assert [t.task.seed for t in result.trajectories] == list(range(9))
    assert "container died" in by_seed[0].error and by_seed[0].status == "error"
    assert by_seed[0].info["error_cause"] == "env:RuntimeError"
    assert by_seed[0].error_traceback.endswith('in boom\n    raise RuntimeError("container died")\nRuntimeError: container died\n')
    assert "turn timed out" in by_seed[1].error and by_seed[1].info["error_cause"] == "timeout:turn"
    assert by_seed[1].error_traceback is None  # a time limit is not raised anywhere worth showing
    metrics = result.metrics
    assert metrics.retried == 6 and metrics.errored == 12 and metrics.finished == 3 and metrics.accounted
    assert by_seed[2].status == "ok" and by_seed[2].success
    summary = result.summary
    assert summary.infra_errors == 6 and summary.episodes == 9 and summary.success_rate == 1.0


def test_an_evaluation_that_scored_nothing_has_no_success_rate(registered_counter):
    tasks = TaskSet([agentgym.Task(env_id="test/Counter-v0", seed=seed) for seed in (0, 3)])  # Crashy's boom seeds
    summary = asyncio.run(agentgym.evaluate("test/Counter-v0", Crashy(), tasks, max_retries=0)).summary
    assert (summary.episodes, summary.infra_errors) == (2, 2)
    assert summary.success_rate is None and summary.mean_reward is None and summary.mean_turns is None


def test_random_is_reproducible_at_any_concurrency(registered_counter):
    tasks = TaskSet.generate("test/Counter-v0", 12, split="test")
    runs = [asyncio.run(agentgym.evaluate("test/Counter-v0", RandomPolicy(), tasks, concurrency=c, seed=7)) for c in (1, 5)]
    for a, b in zip(*(run.trajectories for run in runs), strict=True):
        assert (a.reward, [turn.action for turn in a.turns]) == (b.reward, [turn.action for turn in b.turns])
    assert runs[0].summary.episodes == 12


class SlowAdder(TextPolicy):
    """Adds 1 per turn, thinking 0.1 s each time."""

    name = "slow-adder"

    async def act(self, env, messages, rng):
        await asyncio.sleep(0.1)
        return env.format_call("add", amount=1)


def test_the_episode_limit_holds_even_when_every_turn_is_in_time(registered_counter):
    env = CounterEnv()
    # A turn takes 0.1 s, under a quarter of its limit; the six turns of the episode take at least 0.6 s, over its 0.45 s.
    timeouts = Timeouts(episode=0.45, turn=0.45, tool=0.45)
    task = agentgym.Task(env_id="test/Counter-v0", seed=2, difficulty="hard")
    trajectory = asyncio.run(run_episode(env, SlowAdder(), task, timeouts=timeouts))
    env.close()
    assert trajectory.status == "error" and trajectory.info["error_cause"] == "timeout:episode"
    assert 2 <= trajectory.num_turns < env.default_max_turns


def test_cancelling_an_episode_from_outside_is_not_a_timeout(registered_counter):
    async def main():
        env = CounterEnv()
        task = asyncio.create_task(run_episode(env, SlowAdder(), agentgym.Task(env_id="test/Counter-v0", seed=2)))
        await asyncio.sleep(0.2)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        finally:
            env.close()
        return "finished"

    assert asyncio.run(main()) == "cancelled"


def test_a_cancelled_evaluation_ends_with_the_cancellation(registered_counter):
    """Groups whose episodes were all cancelled have nothing to report and must not break the shutdown."""
    from tests.rollout.envs import SlowOracle

    tasks = TaskSet.generate(registered_counter.id, 16)
    evaluation = agentgym.evaluate(registered_counter.id, SlowOracle(scale=5.0), tasks, concurrency=4)
    try:
        asyncio.run(asyncio.wait_for(evaluation, timeout=0.3))
    except TimeoutError:
        return
    raise AssertionError("the evaluation finished although every episode takes seconds")
