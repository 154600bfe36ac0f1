"""Tool-call parsers: round trips, hand-written cases, and fuzzing that nothing escapes."""

from __future__ import annotations

import keyword
from typing import Literal

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentgym import HermesParser, PythonicParser, ToolCall, ToolSpec, get_parser

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**9, 10**9) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10,
)
calls = st.lists(
    st.builds(lambda name, args: ToolCall(id="x", name=name, arguments=args),
              names, st.dictionaries(names, json_values, max_size=4)),
    min_size=1, max_size=4,
)


@pytest.mark.parametrize("parser", [HermesParser(), PythonicParser()], ids=lambda p: p.name)
@given(calls=calls)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_format_then_parse_gives_back_the_calls(parser, calls):
    if parser.name == "pythonic":  # Python calls nothing named by a keyword (see the test below)
        assume(not any(keyword.iskeyword(name) for c in calls for name in (c.name, *c.arguments)))
    result = parser.parse(parser.format(calls, content="Let me think."))
    assert result.errors == []
    assert [(c.name, c.arguments) for c in result.calls] == [(c.name, c.arguments) for c in calls]
    assert [c.id for c in result.calls] == [f"call_{i}" for i in range(len(calls))]
    assert result.content == "Let me think."


@pytest.mark.parametrize("name, arguments", [("is", {}), ("move", {"class": 1}), ("get-weather", {}),
                                              ("move", {"two words": 1})])
def test_pythonic_format_refuses_names_python_cannot_call(name, arguments):
    with pytest.raises(ValueError, match="cannot be written as a Python call"):
        PythonicParser().format([ToolCall(id="x", name=name, arguments=arguments)])


@pytest.mark.parametrize("parser", [HermesParser(), PythonicParser()], ids=lambda p: p.name)
@given(text=st.text(max_size=400) | st.text(alphabet='<>/_{}[]()"\':,=tool_call namexyz0123456789', max_size=400))
@settings(max_examples=300)
def test_any_text_parses_without_raising(parser, text):
    result = parser.parse(text)
    assert isinstance(result.calls, list) and isinstance(result.errors, list)


def _move(direction: Literal["up", "down"], steps: int = 1) -> str:
    """Move."""
    return ""


MOVE = ToolSpec.from_function(_move, name="move")


def test_hermes_cases():
    parser = HermesParser()
    unclosed = parser.parse('<tool_call>{"name": "move", "arguments": {"direction": "up"}}')
    assert unclosed.calls[0].arguments == {"direction": "up"}
    as_string = parser.parse('<tool_call>{"name": "move", "arguments": "{\\"direction\\": \\"up\\"}"}</tool_call>')
    assert as_string.calls[0].arguments == {"direction": "up"}
    assert "not valid JSON" in parser.parse("<tool_call>{'name': 'move'}</tool_call>").errors[0]
    assert 'no "name"' in parser.parse('<tool_call>{"arguments": {}}</tool_call>').errors[0]
    many = parser.parse('<tool_call>{"name": "m"}</tool_call>' * 20)
    assert len(many.calls) == 16 and "too many" in many.errors[0]


def test_pythonic_cases():
    parser = PythonicParser()
    assert parser.parse('move("down", 3)', [MOVE]).calls[0].arguments == {"direction": "down", "steps": 3}
    assert parser.parse("I think (maybe) so.", [MOVE]).calls == []
    assert parser.parse("os.system('rm -rf /')", [MOVE]).calls == []
    assert "literal values" in parser.parse("move(direction=up)", [MOVE]).errors[0]
    assert "too many positional" in parser.parse('move("up", 1, 2)', [MOVE]).errors[0]
    listed = parser.parse('[move(direction="up"), move(direction="down")]', [MOVE])
    assert [c.arguments["direction"] for c in listed.calls] == ["up", "down"]
    assert parser.parse("move(direction='up', flag=True)").calls[0].arguments == {"direction": "up", "flag": True}


def test_parser_lookup():
    assert get_parser("hermes").name == "hermes"
    with pytest.raises(ValueError, match="choose one of: hermes, pythonic"):
        get_parser("xml")
