"""The conformance checker: an environment's own exceptions fail the check they happen in, and the rest still run."""

from __future__ import annotations

import pytest

from agentgym import EnvCheckError, check_env
from agentgym.checker import run_checks
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
