"""Tool-call parsers: find the tool calls in an agent's text, and write calls back as text.

A parser never raises on what a model writes: whatever it cannot read becomes an entry in
:attr:`ParseResult.errors`, which the environment shows the agent as an error observation.

- ``hermes``: ``<tool_call>{"name": "move", "arguments": {"direction": "up"}}</tool_call>``, the
  format of Hermes, Qwen2.5 and Qwen3 chat templates.
- ``pythonic``: ``move(direction="up")``, one call per line or a list ``[a(x=1), b(y=2)]``, the
  format of Llama 3.2 and of people typing at ``agentgym play``.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentgym.messages import ToolCall
from agentgym.tools import ToolSpec

MAX_CALLS = 16
"""At most this many calls are read from one message; the rest are reported as errors."""
MAX_DEPTH = 32
"""Arguments nested deeper than this (lists and objects inside each other) are refused: no tool takes such
values, and the code that validates, sends and stores them would run out of recursion on deep ones."""
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
LITERALS = 'literal values such as 3, 2.5, "text", true, null, [1, 2] or {"k": 1}'


@dataclass
class ParseResult:
    """The calls found in a message, what could not be read, and the text around the calls."""

    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    content: str = ""


class ToolCallParser(Protocol):
    """Reads tool calls out of model text and writes calls in the same format."""

    name: str

    def parse(self, text: str, tools: Sequence[ToolSpec] = ()) -> ParseResult:
        """Find the calls in ``text``; ``tools`` lets a format map positional arguments to names."""
        ...

    def format(self, calls: Sequence[ToolCall], content: str = "") -> str:
        """Write ``content`` followed by ``calls`` the way a model in this format would."""
        ...


class HermesParser:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, as Qwen and Hermes emit them."""

    name = "hermes"
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)

    def parse(self, text: str, tools: Sequence[ToolSpec] = ()) -> ParseResult:
        result = ParseResult(content=self._block.sub("", text).strip())
        for index, match in enumerate(self._block.finditer(text)):
            if index >= MAX_CALLS:
                result.errors.append(f"too many tool calls; only the first {MAX_CALLS} were read")
                break
            try:
                payload = json.loads(match.group(1))
            except (json.JSONDecodeError, RecursionError) as exc:
                result.errors.append(f"tool call {index + 1} is not valid JSON: {exc}")
                continue
            call = _call_from_payload(payload, f"call_{len(result.calls)}")
            if isinstance(call, str):
                result.errors.append(f"tool call {index + 1} {call}")
            else:
                result.calls.append(call)
        return result

    def format(self, calls: Sequence[ToolCall], content: str = "") -> str:
        blocks = [
            "<tool_call>\n" + json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False) + "\n</tool_call>"
            for c in calls
        ]
        return "\n".join(([content] if content else []) + blocks)


class PythonicParser:
    """``name(key=value, ...)`` calls with literal arguments, one per line or inside ``[...]``."""

    name = "pythonic"
    _start = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
    _max_candidates = 64
    _max_closings = 32
    _max_call_chars = 4096

    def parse(self, text: str, tools: Sequence[ToolSpec] = ()) -> ParseResult:
        specs = {spec.name: spec for spec in tools}
        result = ParseResult()
        spans: list[tuple[int, int]] = []
        position = 0
        for candidates, match in enumerate(self._start.finditer(text)):
            if candidates >= self._max_candidates or len(result.calls) >= MAX_CALLS:
                break
            if match.start() < position:
                continue
            name = match.group(1)
            node, end = self._read_call(text, match.start())
            if node is None:
                if name in specs:
                    result.errors.append(f"could not read the call to {name}: check the brackets and quotes")
                continue
            call = self._to_call(node, name, specs.get(name), f"call_{len(result.calls)}")
            if isinstance(call, str):
                if name in specs:
                    result.errors.append(call)
                continue
            result.calls.append(call)
            spans.append((match.start(), end))
            position = end
        result.content = _remove_spans(text, spans).strip(" \n[],")
        return result

    def format(self, calls: Sequence[ToolCall], content: str = "") -> str:
        """Raises ``ValueError`` for a tool or argument name that Python cannot call by (a keyword such as
        ``is``, or not an identifier): such a call has no pythonic form."""
        for name in (name for c in calls for name in (c.name, *c.arguments)):
            if not name.isidentifier() or keyword.iskeyword(name):
                raise ValueError(f"{name!r} cannot be written as a Python call (a keyword or not an identifier)")
        lines = [
            f"{c.name}(" + ", ".join(f"{k}={v!r}" for k, v in c.arguments.items()) + ")" for c in calls
        ]
        return "\n".join(([content] if content else []) + lines)

    def _read_call(self, text: str, start: int) -> tuple[ast.Call | None, int]:
        """The shortest ``name(...)`` starting at ``start`` that Python reads as one call expression."""
        closing = start
        for _ in range(self._max_closings):
            closing = text.find(")", closing + 1)
            if closing < 0 or closing - start > self._max_call_chars:
                break
            try:
                node = ast.parse(text[start : closing + 1].strip(), mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                return node, closing + 1
            return None, closing + 1
        return None, start

    @staticmethod
    def _to_call(node: ast.Call, name: str, spec: ToolSpec | None, call_id: str) -> ToolCall | str:
        """The call with JSON-valued arguments, or why it is not one."""
        arguments: dict[str, Any] = {}
        try:
            if node.args:
                params = spec.parameter_names if spec else []
                if len(node.args) > len(params):
                    return f"{name}: too many positional arguments; name them, e.g. {name}(key=value)"
                arguments.update(zip(params, (_json_literal(arg) for arg in node.args)))
            for keyword in node.keywords:
                if keyword.arg is None:
                    return f"{name}: **kwargs are not allowed; name each argument"
                arguments[keyword.arg] = _json_literal(keyword.value)
        except (ValueError, RecursionError) as exc:
            reason = str(exc) if isinstance(exc, ValueError) else "they are nested too deep"
            return f"{name}: arguments must be {LITERALS}: {reason}"
        problem = _argument_problem(arguments)
        return f"{name} {problem}" if problem else ToolCall(id=call_id, name=name, arguments=arguments)


PARSERS: dict[str, type[ToolCallParser]] = {"hermes": HermesParser, "pythonic": PythonicParser}


def get_parser(parser: str | ToolCallParser) -> ToolCallParser:
    """A parser by short name (``hermes``, ``pythonic``), or the given parser object unchanged."""
    if not isinstance(parser, str):
        return parser
    try:
        return PARSERS[parser]()
    except KeyError:
        raise ValueError(f"unknown tool-call format {parser!r}; choose one of: {', '.join(PARSERS)}") from None


def _call_from_payload(payload: Any, call_id: str) -> ToolCall | str:
    """A call from a decoded ``{"name": ..., "arguments": ...}`` object, or what is wrong with it."""
    if not isinstance(payload, dict):
        return 'must be a JSON object like {"name": "...", "arguments": {...}}'
    name, arguments = payload.get("name"), payload.get("arguments", payload.get("parameters", {}))
    if not isinstance(name, str) or not name:
        return 'has no "name" string'
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            return f'({name}) has "arguments" that are not a JSON object'
    if not isinstance(arguments, dict):
        return f'({name}) has "arguments" that are not a JSON object'
    problem = _argument_problem(arguments)
    if problem is not None:
        return f"({name}) {problem}"
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _argument_problem(arguments: dict[str, Any]) -> str | None:
    """Why decoded ``arguments`` cannot go to a tool (nested too deep, a number JSON cannot hold, a string that
    is not text), or None."""
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"has a number that is not finite ({value}); {LITERALS} only"
        strings = [*value, *value.values()] if isinstance(value, dict) else [value]
        if any(isinstance(text, str) and _LONE_SURROGATE.search(text) for text in strings):
            return "has a string with a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not text"
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        if children and depth >= MAX_DEPTH:
            return f"has arguments nested more than {MAX_DEPTH} levels deep"
        stack.extend((child, depth + 1) for child in children)
    return None


def _json_literal(node: ast.expr) -> Any:
    """The JSON value a Python literal stands for (a tuple reads as a list); ``ValueError`` naming what is
    not one: a name, a call, bytes, a set, ``...``, a complex number, an object key that is not a string."""
    match node:
        case ast.Constant(value=value) if value is None or isinstance(value, (str, int, float)):
            return value
        case ast.UnaryOp(op=ast.USub() | ast.UAdd() as sign, operand=ast.Constant(value=int() | float() as value)):
            if not isinstance(value, bool):
                return -value if isinstance(sign, ast.USub) else value
        case ast.List(elts=items) | ast.Tuple(elts=items):
            return [_json_literal(item) for item in items]
        case ast.Dict(keys=keys, values=values):
            if all(isinstance(key, ast.Constant) and isinstance(key.value, str) for key in keys):
                return {key.value: _json_literal(value) for key, value in zip(keys, values)}  # type: ignore[union-attr]
            raise ValueError('object keys must be strings, e.g. {"k": 1}')
    raise ValueError(f"{ast.unparse(node)[:40]} is not a JSON value")


def _remove_spans(text: str, spans: list[tuple[int, int]]) -> str:
    pieces, last = [], 0
    for start, end in spans:
        pieces.append(text[last:start])
        last = end
    pieces.append(text[last:])
    return "".join(pieces)
