"""The small Countdown that LATR's benchmark trains on: every task is solvable and its oracle solves it, any right
expression is accepted, and a wrong or malformed one ends the single turn with no reward."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym
from agentgym.registration import _registry
from benchmarks.perf.countdown import _evaluate, _first_solution, register


@pytest.fixture(scope="module")
def env_id():
    env_id = register()
    yield env_id
    _registry.pop(env_id)  # the other tests see the bundled environments only


@pytest.fixture(scope="module")
def env(env_id):
    env = agentgym.make(env_id, parser="pythonic")
    yield env
    env.close()


@pytest.mark.parametrize("solution", ["first", "drawn"])
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_the_oracle_solves_every_task_with_its_one_canonical_line(env_id, solution, seed):
    with agentgym.make(env_id, parser="pythonic", solution=solution) as env:
        observation, _ = env.reset(seed=seed)
        numbers = sorted(env.numbers)
        assert observation[-1].content == f"Numbers: {' '.join(map(str, numbers))}. Target: {env.target}."
        assert all(1 <= n <= 9 for n in numbers) and env.target >= 1
        action = env.oracle_action()
        work, call = action.split("\n")
        assert work.endswith(f"={env.target}") and call.startswith("answer(")
        _, reward, terminated, _, info = env.step(action)
        assert (reward, terminated, info["success"]) == (1.0, True, True)


def test_the_first_solution_is_the_first_in_order_of_the_numbers_then_the_operators():
    assert _first_solution((2, 3, 4), 10) == (2, "*", 3, "+", 4)  # before (3*2)+4 and (4*3)-2
    assert _first_solution((1, 5, 9), 4) == (1, "*", 9, "-", 5)  # no (1 op 5) op 9 makes 4; 1-9 is below 1
    with pytest.raises(ValueError):
        _first_solution((1, 1, 1), 50)


def test_any_right_expression_is_accepted_and_a_wrong_one_ends_the_turn(env):
    env.reset(seed=3)
    a, b, c = env.numbers
    right = next(f"({x}{p}{y}){q}{z}" for x, y, z in ((a, b, c), (b, c, a), (a, c, b), (c, b, a), (b, a, c), (c, a, b))
                 for p in "+-*" for q in "+-*" if _evaluate(f"({x}{p}{y}){q}{z}")[0] == env.target)
    assert env.step(f'answer(expression="{right}")')[1] == 1.0
    for wrong in ("1+1+1", f"{a}+{b}", f"({a}+{b})/{c}", "__import__('os')", f"{a}+{b}+{c}+{c}"):
        env.reset(seed=3)
        _, reward, terminated, truncated, info = env.step(f'answer(expression="{wrong}")')
        assert reward == 0.0 and (terminated or truncated) and not info["success"], wrong


def test_a_turn_without_an_answer_ends_the_episode_unsolved(env):
    env.reset(seed=4)
    _, reward, terminated, truncated, info = env.step("I think it is 12")
    assert reward == 0.0 and truncated and not terminated and info["action_error"].startswith("no tool call found")


def test_the_evaluator_reads_only_whole_numbers_and_plus_minus_times():
    assert _evaluate("(7-2)*3") == (15, [7, 2, 3])
    assert _evaluate(" 9 - 4 * 2 ") == (1, [9, 4, 2])
    for bad in ("2/1", "2**3", "1.5+1", "abs(-3)", "x+1", "(", "1" * 41):
        with pytest.raises(ValueError):
            _evaluate(bad)
