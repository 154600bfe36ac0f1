"""The configs that ship in ``trainers/configs/``, given by name: ``agentgym train quickstart``,
``agentgym sft sft-quickstart``. They are package data, so a name works from any folder and from a wheel."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import click

SFT_PREFIX = "sft-"
"""Bundled configs whose name starts with this are ``agentgym sft``'s; the others are ``agentgym train``'s."""
SUFFIXES = (".yaml", ".yml")


def configs_folder() -> Path:
    """The folder of the bundled configs, in the source tree or in the installed package."""
    return Path(str(resources.files("agentgym.trainers") / "configs"))


def bundled_names(*, sft: bool) -> list[str]:
    """The names of the bundled configs of ``agentgym sft`` (``sft=True``) or of ``agentgym train``."""
    return sorted(path.stem for path in configs_folder().glob("*.yaml") if path.stem.startswith(SFT_PREFIX) == sft)


class ConfigArgument(click.ParamType):
    """A config file's path, or a bundled config's name (no folder, no ``.yaml``); an unknown name lists them."""

    name = "config"

    def __init__(self, *, sft: bool) -> None:
        self.sft = sft

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        """The path as given when it is a file or looks like one, else the bundled config of that name."""
        path = Path(value)
        if path.is_file() or len(path.parts) != 1 or path.suffix in SUFFIXES:
            return path  # a missing file is the config loader's one-line error
        names = bundled_names(sft=self.sft)
        if value not in names:
            self.fail(f"{value!r} is neither a file nor a bundled config; the bundled configs are {', '.join(names)}",
                      param, ctx)
        return configs_folder() / f"{value}.yaml"
