"""Hostile actions against an environment of every entry point, bundled and adapted: whatever an agent writes,
``step`` answers with an observation, and raises only :class:`ResetNeeded` once the episode is over.

Each tool of the environment is called, in turn, with values no honest agent sends: NUL bytes, lone surrogates,
1 MB strings (the action limit raised so that they reach the tool), huge and infinite numbers, arguments nested
10,000 deep (as an object and inside the arguments string), literals of every Python type, and commands that
attack the sandbox. The default run plays one environment of each entry point (see :func:`_params`)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import agentgym
from agentgym import Env
from agentgym.errors import ResetNeeded
from agentgym.tools import ToolSpec, sample_arguments
from tests.envs.conftest import ALL_SPECS, SLOW_TO_START, env_param

pytestmark = pytest.mark.usefixtures("env_prerequisites")

PARSERS = ("hermes", "pythonic")
MEGABYTE = 1 << 20
DEEP = 10_000


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


VALUES: list[object] = [
    "a\x00b", "\x00" * 64, "\x1b[2J\x07\x7f", "\u202e\u2066\ufeff", "\U0001f600" * 50, "x" * MEGABYTE,
    "../" * 20 + "etc/passwd", "%s%n{0}{}", "<script>alert(1)</script>", "'; DROP TABLE t; --",
    "kill -9 -1", "import os; os.kill(-1, 9)", "yes > /tmp/fill",
    10**100, -(10**100), 2**63, -1, 0, 1e308, -0.0, True, None, [], {}, json.loads(_nested(31)),
    {"nested": {"object": [1, "two", None]}},
]
"""Argument values that survive JSON: each goes to one parameter of one tool, the tools taken in turn."""

RAW_HERMES = [
    '<tool_call>{"name": "{tool}", "arguments": ' + json.dumps('{"{param}": ' + _nested(DEEP) + "}") + "}</tool_call>",
    '<tool_call>{"name": "{tool}", "arguments": {"{param}": ' + _nested(DEEP) + "}}</tool_call>",
    '<tool_call>{"name": "{tool}", "arguments": {"{param}": NaN}}</tool_call>',
    '<tool_call>{"name": "{tool}", "arguments": {"{param}": -Infinity}}</tool_call>',
    '<tool_call>{"name": "{tool}", "arguments": {"{param}": "\\ud800"}}</tool_call>',
    '<tool_call>{"name": "{tool}", "arguments": {"{param}": "\\u0000"}}</tool_call>',
    '<tool_call>{"name": "{tool}", "arguments": [1, 2]}</tool_call>',
    '<tool_call>{"name": ["{tool}"], "arguments": {}}</tool_call>',
    '<tool_call>{"name": "{tool}", "arguments": "{\\"{param}\\": 1"}</tool_call>',
]
"""Hermes calls that JSON encoders do not write; ``{tool}`` and ``{param}`` name a tool and its parameter."""

RAW_PYTHONIC = [
    "{tool}({param}=...)", "{tool}({param}=b'x')", "{tool}({param}={1, 2})", "{tool}({param}=1j)",
    "{tool}({param}=1e999)", "{tool}({param}=(1, 'a'))", "{tool}({param}={1: 2})", "{tool}({param}='\\x00')",
    "{tool}({param}='\\ud800')", "{tool}({param}=1" + "0" * 5000 + ")", "{tool}({param}=" + _nested(200) + ")",
    "{tool}({param}=x)", "{tool}({param}=__import__('os').system('id'))", "{tool}({param}=f'{1}')",
    "{tool}({param}=lambda: 1)", "{tool}(**{})", "{tool}(" + ", ".join(["1"] * 50) + ")",
]
"""Pythonic calls with every kind of Python expression as an argument."""

MESSAGES = ["", "\x00", "\ud800\udfff", "x" * MEGABYTE, "(" * 100_000, "<tool_call>" * 10_000,
            "<tool_call>{}</tool_call>" * 100]
"""Whole messages: empty, binary, over a megabyte, and many broken calls."""


def _fill(template: str, spec: ToolSpec) -> str:
    param = next(iter(spec.parameter_names), "x")
    return template.replace("{tool}", spec.name).replace("{param}", param)


def _actions(env: Env, every_tool: bool) -> Iterator[str]:
    """Every hostile action for ``env``: each value to each tool (``every_tool``) or to the next tool in turn,
    on the tool's parameters in turn; then the raw calls in its format over its tools in turn; then the whole
    messages."""
    specs = env.tools
    for index, value in enumerate(VALUES):
        for spec in specs if every_tool else [specs[index % len(specs)]]:
            arguments = sample_arguments(spec)
            names = spec.parameter_names or ["x"]
            arguments[names[index % len(names)]] = value
            yield env.parser.format([agentgym.ToolCall(id="x", name=spec.name, arguments=arguments)])
    raw = RAW_HERMES if env.parser.name == "hermes" else RAW_PYTHONIC
    for index, template in enumerate(raw):
        yield _fill(template, specs[index % len(specs)])
    yield from MESSAGES


def _first_of_each_entry_point() -> list[str]:
    seen: dict[str, str] = {}
    for spec in ALL_SPECS:
        seen.setdefault(spec.entry_point, spec.id)
    return list(seen.values())


def _params() -> list[object]:
    """(id, parser, every_tool) for one environment of each entry point. The default run sends each value to
    every tool of an environment that starts quickly, and to one tool in turn with one parser (taking turns)
    for one slow to start (each episode ended by a value restarts a browser page, a desktop or a server);
    ``-m slow`` sends each value to every tool of those, with both parsers."""
    params = []
    for turn, env_id in enumerate(_first_of_each_entry_point()):
        for parser in PARSERS:
            if env_id not in SLOW_TO_START:
                params.append(env_param(env_id, parser, True))
                continue
            if parser == PARSERS[turn % len(PARSERS)]:
                params.append(env_param(env_id, parser, False))
            params.append(env_param(env_id, parser, True, slow=True))
    return params


@pytest.mark.parametrize(("env_id", "parser", "every_tool"), _params())
def test_hostile_actions_never_raise_out_of_step(env_id, parser, every_tool):
    env = agentgym.make(env_id, parser=parser, max_action_chars=2 * MEGABYTE)
    seed = 0
    try:
        env.reset(seed=seed)
        for action in _actions(env, every_tool):
            observation, reward, terminated, truncated, info = env.step(action)
            assert env.observation_space.contains(observation) and isinstance(reward, float)
            if info["action_error"] is not None:
                assert observation and observation[-1].text
            if terminated or truncated:
                with pytest.raises(ResetNeeded):
                    env.step(action)
                seed += 1
                env.reset(seed=seed)
    finally:
        env.close()
