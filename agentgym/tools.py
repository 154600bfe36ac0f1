"""Tools an environment offers: a typed Python function becomes a JSON-schema tool spec.

Decorate an environment method with :func:`tool`; its signature gives the parameter schema and its
docstring the descriptions (the summary line, and ``Args:`` lines in Google style)::

    @tool
    def move(self, direction: Literal["up", "down", "left", "right"]) -> str:
        \"\"\"Move one square.

        Args:
            direction: Where to go.
        \"\"\"
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar

import jsonschema
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, create_model

from agentgym.errors import ToolError
from agentgym.seeding import pick

F = TypeVar("F", bound=Callable[..., Any])
_TOOL_MARK = "__agentgym_tool__"
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


class ToolSpec(BaseModel):
    """A tool's name, description and JSON schema of its keyword arguments."""

    model_config = ConfigDict(frozen=True)
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    _arguments_model: type[BaseModel] | None = PrivateAttr(default=None)
    _validator: jsonschema.protocols.Validator | None = PrivateAttr(default=None)

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None) -> ToolSpec:
        """Build the spec from a function's signature, type hints and docstring (``self`` is skipped)."""
        summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
        hints = inspect.get_annotations(fn, eval_str=True)
        fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            if param.name in ("self", "cls") or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (hints.get(param.name, Any), Field(default, description=arg_docs.get(param.name)))
        model = create_model(f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        spec = cls(
            name=name or fn.__name__,
            description=description if description is not None else summary,
            parameters=_clean_schema(model.model_json_schema()),
        )
        spec._arguments_model = model
        return spec

    @classmethod
    def from_json_schema(cls, name: str, description: str, parameters: dict[str, Any]) -> ToolSpec:
        """A spec from a JSON schema written elsewhere (an MCP server's tool); arguments are checked against it.
        Raises ``jsonschema.SchemaError`` for a schema that is not one."""
        spec = cls(name=name, description=description, parameters=_clean_schema(parameters))
        validator = jsonschema.validators.validator_for(spec.parameters)
        validator.check_schema(spec.parameters)
        spec._validator = validator(spec.parameters)
        return spec

    @property
    def parameter_names(self) -> list[str]:
        """The parameter names in signature order."""
        return list(self.parameters.get("properties", {}))

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check and coerce arguments against the schema; raise :class:`ToolError` naming each bad one."""
        private = self.__pydantic_private__  # read directly: the hot path of every step
        assert private is not None
        model, validator = private["_arguments_model"], private["_validator"]
        if validator is not None:
            problems = "; ".join(_describe_schema_error(err) for err in validator.iter_errors(arguments))
            if problems:
                raise ToolError(f"invalid arguments for {self.name}: {problems}")
        if model is None:
            return dict(arguments)
        try:
            validated = model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(_describe_error(err) for err in exc.errors(include_url=False))
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None
        return dict(validated.__dict__)

    def to_openai(self) -> dict[str, Any]:
        """The spec in the OpenAI ``tools`` format (also what Hugging Face chat templates take)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def tool(fn: F | None = None, *, name: str | None = None, description: str | None = None) -> Any:
    """Mark an environment method as a tool the agent can call, optionally renamed or re-described."""

    def mark(f: F) -> F:
        setattr(f, _TOOL_MARK, {"name": name, "description": description})
        return f

    return mark(fn) if fn is not None else mark


@functools.cache
def tools_of(cls: type) -> dict[str, tuple[str, ToolSpec]]:
    """The tools a class declares: tool name -> (method name, spec), in definition order."""
    found: dict[str, tuple[str, ToolSpec]] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            options = getattr(value, _TOOL_MARK, None)
            if options is not None:
                spec = ToolSpec.from_function(value, **options)
                found[spec.name] = (attr, spec)
    return found


def sample_arguments(spec: ToolSpec, rng: np.random.Generator | None = None) -> dict[str, Any]:
    """Arguments that fit the schema's types: random ones from ``rng``, or fixed examples without it."""
    arguments: dict[str, Any] = {}
    for key, schema in spec.parameters.get("properties", {}).items():
        arguments[key] = _sample_value(schema, rng)
    return arguments


def _sample_value(schema: dict[str, Any], rng: np.random.Generator | None) -> Any:
    if "enum" in schema:
        options = schema["enum"]
        return pick(rng, options) if rng is not None else options[0]
    kind = schema.get("type")
    if kind == "integer":
        return int(rng.integers(-1000, 1000)) if rng is not None else 1
    if kind == "number":
        return round(float(rng.normal(0, 1000)), 2) if rng is not None else 1.5
    if kind == "boolean":
        return bool(rng.integers(2)) if rng is not None else True
    if kind == "array":
        return [_sample_value(schema.get("items", {}), rng)]
    if kind == "object":
        return {}
    if "anyOf" in schema:
        return _sample_value(schema["anyOf"][0], rng)
    words = ("alpha", "7", "x + 1", "hello world", "42", "?")
    return pick(rng, words) if rng is not None else "..."


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph and the ``Args:`` descriptions of a Google-style docstring."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section, current, arg_indent = "summary", None, None
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            section = "args"
        elif section == "summary":
            if line.strip():
                summary.append(line.strip())
            else:
                section = "body"
        elif section == "args" and line.strip():
            indent = len(line) - len(line.lstrip())
            if indent == 0:
                section = "body"
                continue
            arg_indent = arg_indent or indent
            match = _ARG_LINE.match(line)
            if indent == arg_indent and match:
                current = match.group(1).lstrip("*")
                args[current] = match.group(3).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}"
    return " ".join(summary), args


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles, which only add tokens to a prompt."""
    if isinstance(schema, dict):
        return {k: _clean_schema(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)}
    if isinstance(schema, list):
        return [_clean_schema(v) for v in schema]
    return schema


def _describe_schema_error(err: jsonschema.ValidationError) -> str:
    where = ".".join(str(part) for part in err.absolute_path)
    return f"'{where}': {err.message}" if where else err.message


def _describe_error(err: Any) -> str:
    where = ".".join(str(part) for part in err["loc"]) or "arguments"
    if err["type"] == "missing":
        return f"missing argument '{where}'"
    if err["type"] == "extra_forbidden":
        return f"unexpected argument '{where}'"
    return f"'{where}' {err['msg'][0].lower()}{err['msg'][1:]}"
