"""``check_env``: Gymnasium's checker plus the checks a text agent's environment must pass.

Each check is a small function that raises :class:`EnvCheckError` naming the check and the likely
cause; an exception the environment itself raises during a check fails that check too. Third-party
environments run the same suite with ``agentgym.check_env(env)`` or ``agentgym check ID``.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import jsonschema
import numpy as np
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from agentgym.core import Env
from agentgym.errors import EnvCheckError

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MALFORMED_ACTIONS: tuple[str, ...] = (
    "",
    "   \n\t",
    "I am not sure what to do.",
    "<tool_call>{not json</tool_call>",
    "<tool_call>[1, 2, 3]</tool_call>",
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    '<tool_call>{"name": 42, "arguments": "x"}</tool_call>',
    "<tool_call>",
    "no_such_tool(x=1)",
    "x" * 40_000,
    "\x00\x01\x02 \ud7ff \U0001f600",
)
"""Actions every environment must answer with an error observation instead of an exception."""
CHECKS = ("gymnasium", "tool_schemas", "determinism", "malformed_actions", "oracle")
"""The checks, in the order they run."""


@dataclass
class CheckReport:
    """Which checks passed and how long each took, which failed and why, and the warnings Gymnasium's
    checker gave. A failure caused by an exception of the environment has it as ``__cause__``."""

    env_id: str
    passed: list[tuple[str, float]] = field(default_factory=list)
    failed: list[EnvCheckError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """Checks that do not apply, and why: the oracle's of an environment without one (an adapted game)."""


def check_env(env: Env, *, episodes: int = 3, seed: int = 0, only: Collection[str] | None = None) -> CheckReport:
    """Run the checks on ``env`` (see :func:`run_checks`); raise the first failure as :class:`EnvCheckError`."""
    report = run_checks(env, episodes=episodes, seed=seed, only=only)
    if report.failed:
        raise report.failed[0]
    return report


def run_checks(env: Env, *, episodes: int = 3, seed: int = 0, only: Collection[str] | None = None) -> CheckReport:
    """Run every check on ``env`` (or those of :data:`CHECKS` named in ``only``) and report each one, going on
    after a failure: a check fails on its own :class:`EnvCheckError` or on any exception the environment raises
    while it runs.

    ``episodes`` oracle episodes are played per difficulty level, from seeds starting at ``seed``. An
    environment without an oracle (``oracle_action`` raises ``NotImplementedError``) replays random calls of
    its tools for the determinism check, and its oracle check is skipped.
    """
    if not isinstance(env, Env):
        raise EnvCheckError("type", f"expected an agentgym.Env, got {type(env).__name__}")
    wanted = chosen_checks(only)
    report = CheckReport(env_id=env.spec.id if env.spec else type(env).__name__)
    oracle = bool({"determinism", "oracle"} & set(wanted)) and _has_oracle(env, seed)
    checks: list[tuple[str, Callable[[], None]]] = [
        ("gymnasium", lambda: _check_gymnasium(env, report)),
        ("tool_schemas", lambda: check_tool_schemas(env)),
        ("determinism", lambda: check_determinism(env, seed, oracle=oracle)),
        ("malformed_actions", lambda: check_malformed_actions(env, seed)),
    ]
    if "oracle" in wanted and oracle:
        checks.append(("oracle", lambda: check_oracle(env, episodes, seed)))
    elif "oracle" in wanted:
        report.skipped.append(("oracle", "the environment has no oracle"))
    for name, check in checks:
        if name not in wanted:
            continue
        started = time.perf_counter()
        try:
            check()
        except EnvCheckError as exc:
            report.failed.append(exc)
        except Exception as exc:  # noqa: BLE001 - the environment's own failure: this check fails, the next one runs
            failure = EnvCheckError(name, f"the environment raised {type(exc).__name__}: {exc}")
            failure.__cause__ = exc
            report.failed.append(failure)
        else:
            report.passed.append((name, time.perf_counter() - started))
    return report


def chosen_checks(only: Collection[str] | None) -> tuple[str, ...]:
    """The checks named in ``only`` (every one for ``None``), in :data:`CHECKS`' order; a ``ValueError`` names
    any that is not a check."""
    if only is None:
        return CHECKS
    if isinstance(only, str):
        only = (only,)
    if unknown := sorted(set(only) - set(CHECKS)):
        raise ValueError(f"unknown checks {unknown}; the checks are {', '.join(CHECKS)}")
    return tuple(name for name in CHECKS if name in only)


def _check_gymnasium(env: Env, report: CheckReport) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gymnasium_check_env(env)
        except (AssertionError, TypeError, AttributeError) as exc:
            raise EnvCheckError("gymnasium", f"Gymnasium's env checker failed: {exc}") from exc
    report.warnings.extend(str(w.message) for w in caught)


def check_tool_schemas(env: Env) -> None:
    """Every tool has a valid name, a description and a valid JSON schema for an object of arguments."""
    if not env.tools:
        raise EnvCheckError("tool_schemas", "the environment declares no tools; decorate methods with @agentgym.tool")
    for spec in env.tools:
        if not _TOOL_NAME.match(spec.name):
            raise EnvCheckError("tool_schemas", f"tool name {spec.name!r} must match {_TOOL_NAME.pattern}")
        if not spec.description:
            raise EnvCheckError("tool_schemas", f"tool {spec.name} has no description: give its function a docstring")
        try:
            jsonschema.Draft202012Validator.check_schema(spec.parameters)
        except jsonschema.SchemaError as exc:
            raise EnvCheckError("tool_schemas", f"tool {spec.name} has an invalid JSON schema: {exc.message}") from exc
        if spec.parameters.get("type") != "object":
            raise EnvCheckError("tool_schemas", f"tool {spec.name}'s parameters must be an object schema")


def _has_oracle(env: Env, seed: int) -> bool:
    """Whether ``env`` has an oracle: one that does not raise ``NotImplementedError`` on a fresh episode (any
    other failure is left to the checks, which report it)."""
    try:
        env.reset(seed=seed)
        env.oracle_action()
    except NotImplementedError:
        return False
    except Exception:  # noqa: BLE001 - a broken reset or oracle fails the checks that run them
        return True
    return True


def check_determinism(env: Env, seed: int, turns: int = 5, *, oracle: bool = True) -> None:
    """The same seed and actions (the oracle's, or without one the same random tool calls) give the same
    observations, rewards and flags, at every difficulty."""
    for difficulty in env.difficulties:
        runs = [_replay(env, seed, difficulty, turns, oracle) for _ in range(2)]
        if runs[0] != runs[1]:
            raise EnvCheckError(
                "determinism",
                f"two episodes with seed={seed}, difficulty={difficulty!r} and the same actions differ: "
                "draw all randomness from self.np_random after super().reset(seed=seed)",
            )


def _replay(env: Env, seed: int, difficulty: str, turns: int, oracle: bool) -> list[object]:
    observation, _ = env.reset(seed=seed, options={"difficulty": difficulty})
    record: list[object] = [observation]
    rng = np.random.default_rng(seed)
    for _ in range(turns):
        action = env.oracle_action() if oracle else env.random_action(rng)
        observation, reward, terminated, truncated, info = env.step(action)
        record.append((observation, reward, terminated, truncated, info["success"]))
        if terminated or truncated:
            break
    return record


def check_malformed_actions(env: Env, seed: int) -> None:
    """Nonsense, broken calls, unknown tools and oversized text become error observations, one after another
    in the same episode (a fresh one when the turn limit ends it)."""
    truncated = True
    for action in MALFORMED_ACTIONS:
        if truncated:
            env.reset(seed=seed)
        try:
            observation, _reward, terminated, truncated, info = env.step(action)
        except Exception as exc:
            raise EnvCheckError("malformed_actions", f"step({action[:40]!r}) raised {type(exc).__name__}: {exc}") from exc
        if not env.observation_space.contains(observation) or not observation:
            raise EnvCheckError("malformed_actions", f"step({action[:40]!r}) returned no error message to the agent")
        if info.get("action_error") is None:
            raise EnvCheckError("malformed_actions", f"step({action[:40]!r}) did not set info['action_error']")
        if terminated:
            raise EnvCheckError("malformed_actions", f"step({action[:40]!r}) ended the episode; the agent must get another try")


def check_oracle(env: Env, episodes: int, seed: int) -> None:
    """The oracle solves sampled episodes of every difficulty, and every action it sends runs cleanly."""
    for difficulty in env.difficulties:
        for episode_seed in range(seed, seed + episodes):
            env.reset(seed=episode_seed, options={"difficulty": difficulty})
            where = f"seed={episode_seed}, difficulty={difficulty!r}"
            terminated = truncated = False
            info: dict[str, object] = {}
            while not (terminated or truncated):
                action = env.oracle_action()
                _, _, terminated, truncated, info = env.step(action)
                if info["action_error"] is not None:
                    raise EnvCheckError("oracle", f"{where}: the oracle's action {action!r} failed: {info['action_error']}")
            if not info.get("success"):
                raise EnvCheckError("oracle", f"{where}: the oracle did not solve the task in {env.turn} turns")

