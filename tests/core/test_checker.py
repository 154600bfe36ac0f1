"""The conformance checker: an environment's own exceptions fail the check they happen in, and the rest still run."""

from __future__ import annotations

import random

import pytest

from agentgym import Env, EnvCheckError, check_env, tool
from agentgym.checker import run_checks
from agentgym.messages import Message
from tests.conftest import CounterEnv, ToolCrashes


class ResetCrashes(CounterEnv):
    """An environment whose every reset raises."""

    def setup(self, difficulty, options):
        raise KeyError("level file")


def test_a_crashing_tool_fails_the_checks_it_runs_in_and_the_others_still_run():
    env = ToolCrashes()
    try:
        report = run_checks(env, episodes=1)
    finally:
        env.close()
    assert [name for name, _ in report.passed] == ["gymnasium", "tool_schemas", "malformed_actions"]
    assert [f.check for f in report.failed] == ["determinism", "oracle"]
    assert {str(f) for f in report.failed} == {
        "[determinism] the environment raised RuntimeError: container died",
        "[oracle] the environment raised RuntimeError: container died",
    }
    assert all(isinstance(f.__cause__, RuntimeError) for f in report.failed)


def test_only_the_checks_asked_for_run_and_an_unknown_one_is_refused_by_name():
    env = ToolCrashes()
    try:
        report = run_checks(env, episodes=1, only=["malformed_actions", "gymnasium"])
        assert [name for name, _ in report.passed] == ["gymnasium", "malformed_actions"]
        assert report.failed == [] and report.skipped == []  # the crashing tool's determinism and oracle never ran
        assert [f.check for f in run_checks(env, episodes=1, only=["oracle"]).failed] == ["oracle"]
        with pytest.raises(ValueError, match=r"unknown checks \['gymnasuim'\]; the checks are gymnasium, tool_schemas"):
            run_checks(env, only=["gymnasuim"])
    finally:
        env.close()


def test_a_crashing_reset_fails_every_check_that_resets():
    env = ResetCrashes()
    try:
        report = run_checks(env, episodes=1)
    finally:
        env.close()
    assert [name for name, _ in report.passed] == ["tool_schemas"]
    assert [f.check for f in report.failed] == ["gymnasium", "determinism", "malformed_actions", "oracle"]
    assert {f.reason for f in report.failed} == {"the environment raised KeyError: 'level file'"}


def test_check_env_raises_the_first_failure_with_the_environments_exception_as_cause():
    env = ToolCrashes()
    try:
        with pytest.raises(EnvCheckError, match=r"^\[determinism\] the environment raised RuntimeError") as caught:
            check_env(env, episodes=1)
    finally:
        env.close()
    assert caught.value.check == "determinism" and isinstance(caught.value.__cause__, RuntimeError)


def test_a_passing_environment_has_no_failures():
    env = CounterEnv()
    try:
        report = check_env(env, episodes=1)
    finally:
        env.close()
    assert report.failed == [] and len(report.passed) == 5


class NoOracle(Env):
    """A game adapted from elsewhere: a tool, but nobody to play it perfectly."""

    def setup(self, difficulty, options):
        self.secret = int(self.np_random.integers(10))
        return [Message(role="user", content="Guess my digit.")]

    @tool
    def guess(self, digit: int) -> str:
        """Guess the digit.

        Args:
            digit: From 0 to 9.
        """
        self.finish(success=digit == self.secret)
        return "right" if digit == self.secret else f"wrong, it was {self.secret}"


class NoOracleNondeterministic(NoOracle):
    """... whose episodes also draw from the global random state instead of ``self.np_random``."""

    def setup(self, difficulty, options):
        super().setup(difficulty, options)
        self.secret = random.randrange(10**6)
        return [Message(role="user", content="Guess my number.")]


def test_an_environment_without_an_oracle_skips_that_check_and_replays_random_calls_for_determinism():
    env = NoOracle()
    try:
        report = check_env(env, episodes=1)
        assert [name for name, _ in report.passed] == ["gymnasium", "tool_schemas", "determinism", "malformed_actions"]
        assert report.skipped == [("oracle", "the environment has no oracle")]
    finally:
        env.close()
    env = NoOracleNondeterministic()
    try:
        assert "determinism" in [f.check for f in run_checks(env, episodes=1).failed]
    finally:
        env.close()
