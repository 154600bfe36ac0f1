"""Typed configs: YAML files validated by pydantic models, with ``a.b=value`` overrides from the command line.

Every failure is a one-line :class:`~agentgym.errors.ConfigError` that names the dotted key; override values
are YAML (``lr=1e-4``, ``tags=[a, b]``, ``env.kwargs={max_turns: 4}``, ``name=null``) and replace what they name.
"""

from __future__ import annotations

import copy
import difflib
import re
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, Union, get_args, get_origin

import click
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import to_jsonable_python

from agentgym.errors import ConfigError

__all__ = ["Config", "ConfigKey", "apply_overrides", "config_help", "config_or_exit", "dump_config", "load_config"]

M = TypeVar("M", bound=BaseModel)


class Config(BaseModel):
    """Base of agentgym's configs: unknown keys are errors, attribute docstrings are the help, values frozen."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class ConfigKey(NamedTuple):
    """One row of :func:`config_help`: a dotted key, its type, its default (YAML) and its one-line help."""

    key: str
    type: str
    default: str
    help: str


_FLOAT = (r"[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+"
          r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_CORE_SCHEMA = [  # YAML 1.2's core schema in resolution order: (tag, pattern, first characters)
    ("bool", "true|True|TRUE|false|False|FALSE", "tTfF"),
    ("null", "~|null|Null|NULL|", ["~", "n", "N", ""]),
    ("int", "[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+", "-+0123456789"),
    ("float", _FLOAT, "-+0123456789."),
    ("merge", "<<", "<"),
]


class _Loader(yaml.SafeLoader):
    """YAML 1.2's core schema: only ``true``/``false`` are booleans, ``1e-4`` is a float, dates stay strings."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's own class attribute, replaced below


class _Dumper(yaml.SafeDumper):
    """Quotes every string that YAML 1.1 or :class:`_Loader` would read as something else, so dumps round-trip."""


for _tag, _pattern, _first in _CORE_SCHEMA:
    _Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern})$"), list(_first))
_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(f"^(?:{_FLOAT})$"), list("-+0123456789."))


def load_config(model: type[M], path: str | Path | None = None, overrides: Sequence[str] = ()) -> M:
    """Read the YAML mapping at ``path`` (none: empty), apply ``a.b=value`` overrides, validate as ``model``."""
    data = _read_yaml(Path(path)) if path is not None else {}
    data = apply_overrides(data, overrides)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, model)) from None


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of ``data`` with each ``a.b.c=value`` set in order; missing (or null) mappings on the way are made."""
    data = copy.deepcopy(data)
    for override in overrides:
        key, sep, text = override.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigError(f"override {override!r} has no '=': write KEY=VALUE, e.g. lr=1e-4")
        parts = key.split(".")
        if not all(parts):
            raise ConfigError(f"override {override!r}: the key {key!r} has an empty part; write a.b=value")
        node = data
        for depth, part in enumerate(parts[:-1]):
            if node.get(part) is None:
                node[part] = {}
            elif not isinstance(node[part], dict):
                parent = ".".join(parts[: depth + 1])
                raise ConfigError(f"{key}: cannot set it, {parent} holds {_short(node[part])} "
                                  f"({type(node[part]).__name__}), not a mapping; set {parent}=... as a whole")
            node = node[part]
        node[parts[-1]] = _load_yaml(text, f"{key}: cannot parse the override value {text!r} as YAML")
    return data


def dump_config(config: BaseModel) -> str:
    """The resolved config as YAML, every field included; :func:`load_config` reads it back to an equal config."""
    return yaml.dump(config.model_dump(mode="json"), Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def config_help(model: type[BaseModel]) -> list[ConfigKey]:
    """Every dotted key of ``model`` (nested sections expanded) with its type, default and docstring."""
    return list(_keys(model, "", None))


def config_or_exit(model: type[M], path: str | Path | None = None, overrides: Sequence[str] = ()) -> M:
    """:func:`load_config` for CLIs: a :class:`ConfigError` becomes one line on stderr and exit status 2."""
    try:
        return load_config(model, path, overrides)
    except ConfigError as exc:
        click.echo(f"agentgym: error: {exc}", err=True)
        sys.exit(2)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {_one_line(exc)}") from None
    data = _load_yaml(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys to values, not {type(data).__name__}")
    return data


def _load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = _one_line(getattr(exc, "problem", None) or exc)
        raise ConfigError(f"{source}: YAML syntax error{at}: {problem}") from None


def _describe(exc: ValidationError, model: type[BaseModel]) -> str:
    """One line for all of pydantic's errors: ``key: problem`` each, unknown keys with the closest valid key."""
    problems = []
    for error in exc.errors(include_url=False):
        key, holder = _locate(error["loc"], model)
        if error["type"] == "extra_forbidden":
            problems.append(_unknown_key(key, holder))
        elif error["type"] == "missing":
            problems.append(f"{key}: required but not set")
        else:
            problems.append(f"{key}: {error['msg']} (got {_short(error['input'])})")
    return _one_line("; ".join(problems))


def _unknown_key(key: str, holder: Any) -> str:
    parent, _, name = key.rpartition(".")
    section = _section(holder)
    valid = list(section.model_fields) if section is not None else []
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    if close:
        return f"{key}: unknown key; did you mean {key.removesuffix(name)}{close[0]}?"
    listed = f"; valid keys {f'in {parent}' if parent else 'here'}: {', '.join(valid)}" if valid else ""
    return f"{key}: unknown key{listed}"


def _locate(loc: tuple[int | str, ...], model: type[BaseModel]) -> tuple[str, Any]:
    """``a.b[0].c`` from pydantic's ``loc`` without the member names it adds inside unions; the type holding ``c``."""
    key, node, holder = "", _optional(model), model
    for part in loc:
        if _is_union(node):  # pydantic names the union member it tried: not a key
            node = Any
            continue
        key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else part
        holder, node = node, _optional(_child(node, part))
    return key or "(top level)", holder


def _child(node: Any, part: int | str) -> Any:
    if isinstance(node, type) and issubclass(node, BaseModel):
        field = node.model_fields.get(str(part))
        return field.annotation if field is not None else Any
    args = get_args(node)
    return args[-1] if args else Any  # list[T] -> T, dict[K, V] -> V


def _keys(model: type[BaseModel], prefix: str, defaults: BaseModel | None) -> Iterator[ConfigKey]:
    for name, field in model.model_fields.items():
        key, doc = prefix + name, (field.description or "").strip().split("\n")[0]
        if field.is_required():
            default: Any = ...
        else:
            default = getattr(defaults, name) if defaults is not None else field.get_default(
                call_default_factory=True, validated_data={})
        section = _section(field.annotation)
        if section is None or field.annotation is not section:  # a value, or an optional section's own row
            yield ConfigKey(key, _type_name(field.annotation), _show(default), doc)
        if section is not None:
            yield from _keys(section, key + ".", default if isinstance(default, section) else None)


def _section(annotation: Any) -> type[BaseModel] | None:
    """The model class of a nested section (``Section`` or ``Section | None``), else None."""
    inner = _optional(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def _optional(annotation: Any) -> Any:
    """``T`` for ``T | None``; anything else unchanged."""
    options = [a for a in get_args(annotation) if a is not type(None)] if _is_union(annotation) else []
    return options[0] if len(options) == 1 else annotation


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _type_name(annotation: Any) -> str:
    if _is_union(annotation):
        return " | ".join("None" if a is type(None) else _type_name(a) for a in get_args(annotation))
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return re.sub(r"(?<![\w'\".])(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])", "", str(annotation))  # no module paths


def _show(value: Any) -> str:
    if value is ...:
        return "required"
    text = yaml.dump(to_jsonable_python(value), Dumper=_Dumper, default_flow_style=True, width=sys.maxsize)
    return text.removesuffix("\n").removesuffix("\n...")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _one_line(value: object) -> str:
    return " ".join(str(value).splitlines())
