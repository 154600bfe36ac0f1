"""What every tool-call format shares: the result of a parse, the parser protocol, and the checks on arguments.

A parser never raises on what a model writes: whatever it cannot read becomes an entry in
:attr:`ParseResult.errors`, which the environment shows the agent as an error observation.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
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


Found = tuple[str, dict[str, Any]] | str
"""A call read from the text, as its tool's name and decoded arguments, or what is wrong with it."""


def collect(found: Iterable[Found], content: str) -> ParseResult:
    """The calls ``found`` (ids ``call_0``, ``call_1``, ...; at most :data:`MAX_CALLS`), each one that is not a call
    or whose arguments no tool can take an error naming it, and the text around them."""
    result = ParseResult(content=content)
    for index, item in enumerate(found):
        if index >= MAX_CALLS:
            result.errors.append(f"too many tool calls; only the first {MAX_CALLS} were read")
            break
        if isinstance(item, tuple) and (problem := argument_problem(item[1])) is not None:
            item = f"({item[0]}) {problem}"
        if isinstance(item, str):
            result.errors.append(f"tool call {index + 1} {item}")
        else:
            result.calls.append(ToolCall(id=f"call_{len(result.calls)}", name=item[0], arguments=item[1]))
    return result


def call_from_json(text: str) -> Found:
    """A call from the JSON text of a ``{"name": ..., "arguments": ...}`` object."""
    try:
        return call_from_payload(json.loads(text))
    except (json.JSONDecodeError, RecursionError) as exc:
        return f"is not valid JSON: {exc}"


def call_from_payload(payload: Any, name: str | None = None) -> Found:
    """A call from a decoded ``{"name": ..., "arguments": ...}`` object (``"parameters"`` read as
    ``"arguments"``; the arguments may be a JSON string), or from ``name`` and its decoded or JSON-text
    arguments."""
    if name is None:
        if not isinstance(payload, dict):
            return 'must be a JSON object like {"name": "...", "arguments": {...}}'
        name, payload = payload.get("name"), payload.get("arguments", payload.get("parameters", {}))
        if not isinstance(name, str) or not name:
            return 'has no "name" string'
    if isinstance(payload, str):
        try:
            payload = json.loads(payload) if payload.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            return f'({name}) has "arguments" that are not a JSON object'
    if not isinstance(payload, dict):
        return f'({name}) has "arguments" that are not a JSON object'
    return name, payload


def argument_problem(arguments: dict[str, Any]) -> str | None:
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


def remove_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the ``(start, end)`` spans (in order, not overlapping)."""
    pieces, last = [], 0
    for start, end in spans:
        pieces.append(text[last:start])
        last = end
    pieces.append(text[last:])
    return "".join(pieces)
