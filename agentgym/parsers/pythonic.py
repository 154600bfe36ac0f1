"""``pythonic``: ``move(direction="up")``, one call per line or a list ``[a(x=1), b(y=2)]``, the format of Llama 3.2's
and Llama 4's pythonic templates and of people typing at ``agentgym play``."""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Sequence
from typing import Any

from agentgym.messages import ToolCall
from agentgym.parsers.base import LITERALS, MAX_CALLS, ParseResult, argument_problem, remove_spans
from agentgym.tools import ToolSpec


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
        result.content = remove_spans(text, spans).strip(" \n[],")
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
        problem = argument_problem(arguments)
        return f"{name} {problem}" if problem else ToolCall(id=call_id, name=name, arguments=arguments)


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
