"""``qwen3_coder``: Qwen3-Coder's XML calls, each parameter's value as plain text.

``<tool_call>\n<function=move>\n<parameter=direction>\nup\n</parameter>\n</function>\n</tool_call>``, as the
Qwen3-Coder chat template writes a call: a string as it is, any other value as JSON (the template's ``| string``
writes ``True``, ``False`` and ``None`` for the JSON literals, read here as well). A value is a string where the
tool's schema says so, else whatever JSON it reads as, else the text itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agentgym.messages import ToolCall
from agentgym.parsers.base import Found, ParseResult, collect
from agentgym.tools import ToolSpec

_PYTHON_LITERALS = {"True": True, "False": False, "None": None}


class Qwen3CoderParser:
    """``<tool_call><function=name><parameter=key>value</parameter>...</function></tool_call>`` blocks."""

    name = "qwen3_coder"
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
    _function = re.compile(r"<function=([^>\n]*)>(.*?)(?:</function>|\Z)", re.DOTALL)
    _parameter = re.compile(r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)

    def parse(self, text: str, tools: Sequence[ToolSpec] = ()) -> ParseResult:
        types = {spec.name: spec.parameters.get("properties", {}) for spec in tools}
        calls = (self._call(match.group(1), types) for match in self._block.finditer(text))
        return collect(calls, self._block.sub("", text).strip())

    def format(self, calls: Sequence[ToolCall], content: str = "") -> str:
        blocks = [
            f"<tool_call>\n<function={c.name}>\n"
            + "".join(f"<parameter={key}>\n{_text(value)}\n</parameter>\n" for key, value in c.arguments.items())
            + "</function>\n</tool_call>"
            for c in calls
        ]
        return "\n".join(([content] if content else []) + blocks)

    def _call(self, block: str, types: dict[str, dict[str, Any]]) -> Found:
        function = self._function.search(block)
        if function is None or not function.group(1).strip():
            return "has no <function=name> block"
        name = function.group(1).strip()
        properties = types.get(name, {})
        arguments = {}
        for parameter in self._parameter.finditer(function.group(2)):
            key = parameter.group(1).strip()
            schema = properties.get(key)
            kind = schema.get("type") if isinstance(schema, dict) else None
            arguments[key] = _value(_unwrap(parameter.group(2)), kind)
        return name, arguments


def _text(value: Any) -> str:
    """A value as the template writes it: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _unwrap(text: str) -> str:
    """The value between the newline after ``<parameter=...>`` and the one before ``</parameter>``."""
    text = text.removeprefix("\n")
    return text.removesuffix("\n")


def _value(text: str, kind: Any) -> Any:
    """The argument ``text`` stands for, given its schema ``type`` (if the tool declares one)."""
    if kind == "string" or (isinstance(kind, list) and "string" in kind and text != "null"):
        return text
    try:
        return json.loads(text, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return _PYTHON_LITERALS.get(text.strip(), text)


def _refuse(constant: str) -> Any:
    """``NaN`` and ``Infinity`` are no JSON a tool takes: such a value stays text."""
    raise ValueError(constant)
