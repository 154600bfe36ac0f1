"""Typed configs: YAML + ``a.b=value`` overrides, one-line errors naming the key, dump round trip, CLI exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from agentgym.config import (
    Config,
    ConfigKey,
    apply_overrides,
    config_help,
    config_or_exit,
    dump_config,
    load_config,
)
from agentgym.errors import ConfigError


class ModelSection(Config):
    name: str = "tiny"
    """Local folder or preset of the policy model."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Weights' dtype."""


class EnvSection(Config):
    id: str
    """Registered environment id."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for ``make``."""
    tags: list[str] = Field(default_factory=list)
    """Labels for the run."""


class LoraSection(Config):
    rank: int = Field(8, ge=1)
    """Adapter rank."""


class Example(Config):
    model: ModelSection = ModelSection()
    """The policy model."""
    lr: float = Field(1e-4, gt=0)
    """Learning rate of AdamW."""
    env: EnvSection
    """The training environment."""
    lora: LoraSection | None = None
    """LoRA adapters; null trains every weight."""
    steps: int = Field(100, ge=1)
    """Optimizer steps."""
    name: str | None = None
    """Run name; null derives one."""
    debug: bool = False
    """Log every token."""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return path


def error_of(*args: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(Example, *args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_yaml_then_overrides_in_order(tmp_path: Path) -> None:
    path = write(tmp_path, "lr: 3.0e-4\nenv:\n  id: games/Sokoban-v0\n  tags: [x]\nmodel:\n  name: small\n")
    config = load_config(Example, path, [
        "lr=1e-5", "env.kwargs={max_turns: 4}", "env.tags=[a, b]", "name=run-1", "name=null", "steps=7", "steps=9",
    ])
    assert config.lr == 1e-5
    assert config.env == EnvSection(id="games/Sokoban-v0", kwargs={"max_turns": 4}, tags=["a", "b"])
    assert config.model == ModelSection(name="small")
    assert config.name is None and config.steps == 9
    assert config.lora is None


def test_overrides_alone_and_creating_missing_sections() -> None:
    config = load_config(Example, overrides=["env.id=tools/Calculator-v0", "lora.rank=16", "model.dtype=bfloat16"])
    assert config.env.id == "tools/Calculator-v0"
    assert config.lora == LoraSection(rank=16)
    assert config.model == ModelSection(dtype="bfloat16")


def test_values_follow_yaml_1_2(tmp_path: Path) -> None:
    """``1e-4`` is a float, only true/false are booleans, dates and ``007`` stay strings; typed fields coerce."""
    path = write(tmp_path, "lr: 1e-4\nenv: {id: e, kwargs: {eps: 2E+3, on: yes, day: 2024-01-01, n: 007, h: 0x1f}}")
    config = load_config(Example, path, ["name=on", "debug=yes"])
    assert config.lr == 1e-4
    assert config.env.kwargs == {"eps": 2000.0, "on": "yes", "day": "2024-01-01", "n": "007", "h": 31}
    assert config.name == "on" and config.debug is True
    assert load_config(Example, path, ["name=2024-01-01", "debug=false"]).name == "2024-01-01"


def test_configs_are_frozen() -> None:
    config = load_config(Example, overrides=["env.id=e"])
    with pytest.raises(ValueError, match="frozen"):
        config.lr = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["lr=abc"], "lr: Input should be a valid number, unable to parse string as a number (got 'abc')"),
        (["lr=-1"], "lr: Input should be greater than 0 (got -1)"),
        (["lora.rank=0"], "lora.rank: Input should be greater than or equal to 1 (got 0)"),
        (["model.dtype=fp8"], "model.dtype: Input should be 'float32' or 'bfloat16' (got 'fp8')"),
        (["env.tags=[a, [b]]"], "env.tags[1]: Input should be a valid string (got ['b'])"),
        (["env=null"], "env: Input should be a valid dictionary or instance of EnvSection (got None)"),
        (["env.id=null"], "env.id: Input should be a valid string (got None)"),
        (["model.nmae=x"], "model.nmae: unknown key; did you mean model.name?"),
        (["stepz=3"], "stepz: unknown key; did you mean steps?"),
    ],
)
def test_validation_errors_name_the_dotted_key(overrides: list[str], expected: str) -> None:
    assert error_of(overrides=["env.id=e", *overrides]) == expected


def test_missing_key_is_named() -> None:
    assert error_of() == "env: required but not set"
    assert error_of(overrides=["env.tags=[a]"]) == "env.id: required but not set"


def test_unknown_key_without_a_close_match_lists_the_valid_keys() -> None:
    message = error_of(overrides=["env.id=e", "zzzzzz=1"])
    assert message == "zzzzzz: unknown key; valid keys here: model, lr, env, lora, steps, name, debug"
    message = error_of(overrides=["env.id=e", "env.zzzzzz=1"])
    assert message == "env.zzzzzz: unknown key; valid keys in env: id, kwargs, tags"


class Sweep(Config):
    runs: list[ModelSection] = Field(default_factory=list)
    """One model section per run."""
    batch: int | Literal["auto"] = "auto"
    """Sequences per step, or auto."""


def test_keys_inside_lists_and_unions() -> None:
    """Indices appear as ``[i]``; pydantic's union member names never appear as keys."""
    with pytest.raises(ConfigError, match=r"^runs\[1\]\.nmae: unknown key; did you mean runs\[1\]\.name\?$"):
        load_config(Sweep, overrides=["runs=[{name: a}, {nmae: b}]"])
    with pytest.raises(ConfigError) as info:
        load_config(Sweep, overrides=["batch=many"])
    assert str(info.value) == ("batch: Input should be a valid integer, unable to parse string as an integer "
                               "(got 'many'); batch: Input should be 'auto' (got 'many')")
    assert config_help(Sweep)[1] == ConfigKey("batch", "int | Literal['auto']", "auto", "Sequences per step, or auto.")


def test_several_problems_share_one_line() -> None:
    assert error_of(overrides=["lr=0", "steps=0", "env={}"]) == (
        "lr: Input should be greater than 0 (got 0); env.id: required but not set; "
        "steps: Input should be greater than or equal to 1 (got 0)"
    )


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("lr", "override 'lr' has no '=': write KEY=VALUE, e.g. lr=1e-4"),
        ("=3", "override '=3': the key '' has an empty part; write a.b=value"),
        ("env..id=3", "override 'env..id=3': the key 'env..id' has an empty part; write a.b=value"),
        ("env.id.x=3", "env.id.x: cannot set it, env.id holds 'e' (str), not a mapping; set env.id=... as a whole"),
        ("env.tags.x=3", ("env.tags.x: cannot set it, env.tags holds ['t'] (list), not a mapping; "
                          "set env.tags=... as a whole")),
        ("env.tags=[a, b", ("env.tags: cannot parse the override value '[a, b' as YAML: YAML syntax error "
                            "at line 1, column 6: expected ',' or ']', but got '<stream end>'")),
    ],
)
def test_malformed_overrides_name_the_key(tmp_path: Path, override: str, expected: str) -> None:
    path = write(tmp_path, "env: {id: e, tags: [t]}\n")
    assert error_of(path, [override]) == expected


def test_file_errors(tmp_path: Path) -> None:
    assert error_of(tmp_path / "nope.yaml") == f"config file {tmp_path / 'nope.yaml'} does not exist"
    path = write(tmp_path, "env:\n  id: e\n  tags: [a, b\nlr: 1\n")
    assert error_of(path).startswith(f"{path}: YAML syntax error at line 4, column 3: ")
    path = write(tmp_path, "- lr: 1\n- env: e\n")
    assert error_of(path) == f"{path}: the top level must be a mapping of keys to values, not list"
    assert error_of(tmp_path).startswith(f"cannot read config file {tmp_path}: ")


def test_empty_file_is_an_empty_mapping(tmp_path: Path) -> None:
    assert load_config(Example, write(tmp_path, "# nothing yet\n"), ["env.id=e"]).env.id == "e"


def test_apply_overrides_leaves_the_input_alone() -> None:
    data = {"env": {"id": "e", "kwargs": {"a": 1}}, "lora": None}
    result = apply_overrides(data, ["env.kwargs.b=2", "lora.rank=4"])
    assert result == {"env": {"id": "e", "kwargs": {"a": 1, "b": 2}}, "lora": {"rank": 4}}
    assert data == {"env": {"id": "e", "kwargs": {"a": 1}}, "lora": None}


def test_dump_round_trips(tmp_path: Path) -> None:
    config = load_config(Example, overrides=[
        "env.id=games/FrozenLake-v0", "env.kwargs={size: 4, slippery: true, note: '1e5', none: null}",
        "env.tags=['yes', '007', '1e-3', \"multi\\nline\", '2024-01-01']", "lora.rank=3", "lr=2.5e-7", "name=on",
    ])
    assert config.name == "on" and config.env.tags == ["yes", "007", "1e-3", "multi\nline", "2024-01-01"]
    text = dump_config(config)
    assert text.startswith("model:\n  name: tiny\n  dtype: float32\nlr: 2.5e-07\nenv:\n")
    path = write(tmp_path, text)
    assert load_config(Example, path) == config
    assert dump_config(load_config(Example, path)) == text


def test_config_help_lists_every_dotted_key_with_type_default_and_docstring() -> None:
    rows = config_help(Example)
    assert [r.key for r in rows] == [
        "model.name", "model.dtype", "lr", "env.id", "env.kwargs", "env.tags", "lora", "lora.rank", "steps", "name",
        "debug",
    ]
    by_key = {r.key: r for r in rows}
    assert by_key["lr"] == ConfigKey("lr", "float", "0.0001", "Learning rate of AdamW.")
    assert by_key["model.dtype"] == ConfigKey("model.dtype", "Literal['float32', 'bfloat16']", "float32", "Weights' dtype.")
    assert by_key["env.id"] == ConfigKey("env.id", "str", "required", "Registered environment id.")
    assert by_key["env.kwargs"] == ConfigKey("env.kwargs", "dict[str, Any]", "{}", "Keyword arguments for ``make``.")
    assert by_key["lora"] == ConfigKey("lora", "LoraSection | None", "null", "LoRA adapters; null trains every weight.")
    assert by_key["lora.rank"].default == "8"
    assert by_key["name"].type == "str | None"


def test_section_defaults_come_from_the_parent() -> None:
    class Parent(Config):
        model: ModelSection = ModelSection(name="big")
        """The model."""

    assert config_help(Parent)[0] == ConfigKey("model.name", "str", "big", "Local folder or preset of the policy model.")


_segment = st.from_regex(r"[a-z_][a-z0-9_-]{0,6}", fullmatch=True)
_text = st.text(st.characters(categories=("L", "N", "P", "S", "Zs")), max_size=12)
_scalar = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text
_value = _scalar | st.lists(_scalar, max_size=3)
_tree = st.recursive(_value, lambda inner: st.dictionaries(_segment, inner, min_size=1, max_size=3), max_leaves=8)


def _flatten(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in tree.items():
        if isinstance(value, dict):
            items.extend(_flatten(value, f"{prefix}{key}."))
        else:
            items.append((prefix + key, value))
    return items


@settings(max_examples=200, deadline=None)
@given(tree=st.dictionaries(_segment, _tree, max_size=4), data=st.data())
def test_override_parser_round_trips_json_values_into_the_nested_dict(tree: dict[str, Any], data: st.DataObject) -> None:
    """Any JSON value is a valid override value; the dotted keys rebuild the nested mapping in any order."""
    items = data.draw(st.permutations(_flatten(tree)))
    overrides = [f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in items]
    assert apply_overrides({}, overrides) == tree


@click.command()
@click.argument("config_path", required=False)
@click.argument("overrides", nargs=-1)
def train(config_path: str | None, overrides: tuple[str, ...]) -> None:
    """A stand-in trainer command: load the config and print its learning rate."""
    config = config_or_exit(Example, config_path, overrides)
    click.echo(f"lr={config.lr}")


def test_click_command_exits_2_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "env: {id: e}\n")
    ok = CliRunner().invoke(train, [str(path), "lr=0.5"])
    assert (ok.exit_code, ok.stdout) == (0, "lr=0.5\n")
    bad = CliRunner().invoke(train, [str(path), "lr=-2"])
    assert bad.exit_code == 2
    assert bad.stdout == ""
    assert bad.stderr == "agentgym: error: lr: Input should be greater than 0 (got -2)\n"
