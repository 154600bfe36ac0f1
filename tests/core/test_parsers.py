"""Tool-call parsers: round trips, hand-written cases, and fuzzing that nothing escapes."""

from __future__ import annotations

import json
import keyword
from typing import Literal

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentgym import HermesParser, PythonicParser, ToolCall, ToolSpec, get_parser
from agentgym.parsers import MAX_DEPTH

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


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [40, 900, 10_000])
def test_hermes_refuses_deeply_nested_arguments_in_the_string_and_the_object(depth):
    """Arguments as a JSON object or as a string of JSON (as OpenAI sends them), nested past the limit and
    past Python's recursion limit, are an error the agent reads, never an exception."""
    arguments = '{"direction": ' + _nested(depth) + "}"
    for encoded in (arguments, json.dumps(arguments)):
        result = HermesParser().parse('<tool_call>{"name": "move", "arguments": ' + encoded + "}</tool_call>")
        assert result.calls == [] and len(result.errors) == 1


def test_arguments_nested_to_the_limit_are_read():
    direction = json.loads(_nested(MAX_DEPTH - 1))
    call = HermesParser().parse(HermesParser().format([ToolCall(id="x", name="move", arguments={"d": direction})]))
    assert call.errors == [] and call.calls[0].arguments == {"d": direction}
    too_deep = HermesParser().parse('<tool_call>{"name": "m", "arguments": {"d": ' + _nested(MAX_DEPTH) + "}}</tool_call>")
    assert f"more than {MAX_DEPTH} levels" in too_deep.errors[0]


@pytest.mark.parametrize(
    "argument, reason",
    [("...", "not a JSON value"), ("b'x'", "not a JSON value"), ("{1, 2}", "not a JSON value"),
     ("1j", "not a JSON value"), ("1 + 2j", "not a JSON value"), ("{1: 2}", "keys must be strings"), ("1e999", "not finite"),
     ("-1e999", "not finite"), ("[[[[1]]]]", None), ("(1, 'a')", None), ("-3", None), ("{'k': None}", None)],
)
def test_pythonic_takes_only_json_values(argument, reason):
    result = PythonicParser().parse(f"move(x={argument})", [MOVE])
    if reason is None:
        assert result.errors == [] and json.loads(json.dumps(result.calls[0].arguments, allow_nan=False))
    else:
        assert result.calls == [] and reason in result.errors[0] and "literal values" in result.errors[0]


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_hermes_refuses_numbers_json_cannot_hold(text):
    for arguments in ('{"x": ' + text + "}", json.dumps('{"x": ' + text + "}")):
        result = HermesParser().parse('<tool_call>{"name": "move", "arguments": ' + arguments + "}</tool_call>")
        assert result.calls == [] and "not finite" in result.errors[0]


json_literals = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10) | st.binary(max_size=4)
    | st.complex_numbers() | st.just(...) | st.sets(st.integers(), min_size=1, max_size=3),
    lambda children: st.lists(children, max_size=3) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=4) | st.integers(), children, max_size=3),
    max_leaves=8,
)


@given(value=json_literals)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_pythonic_arguments_are_always_json(value):
    """Whatever literal a model writes, a read call's arguments survive strict JSON: tools never see bytes,
    sets, ``...``, complex or infinite numbers."""
    result = PythonicParser().parse(f"move(x={value!r})", [MOVE])
    for call in result.calls:
        json.dumps(call.arguments, allow_nan=False)
    assert len(result.calls) + len(result.errors) == 1


@pytest.mark.parametrize(
    "text",
    [r'<tool_call>{"name": "move", "arguments": {"x": "a\ud800b"}}</tool_call>',
     r'<tool_call>{"name": "move", "arguments": "{\"x\": [\"\\udfff\"]}"}</tool_call>',
     r'<tool_call>{"name": "move", "arguments": {"\ud800": 1}}</tool_call>',
     r'move(x="a\ud800b")', r"move(x={'\udfff': 1})"],
)
def test_strings_with_a_lone_surrogate_are_refused(text):
    """A JSON or Python escape can spell half a character, which no tool can encode (a browser, a subprocess)."""
    result = get_parser("hermes" if text.startswith("<") else "pythonic").parse(text, [MOVE])
    assert result.calls == [] and "lone surrogate" in result.errors[0]


def test_nul_bytes_are_text():
    result = HermesParser().parse(HermesParser().format([ToolCall(id="x", name="move", arguments={"x": "a\x00b"})]))
    assert result.calls[0].arguments == {"x": "a\x00b"}
