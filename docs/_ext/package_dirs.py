"""A Griffe extension that maps the `agentgym` namespace as setuptools does.

`pyproject.toml` places several folders into the `agentgym` namespace with
`[tool.setuptools.package-dir]`: `envs/` is `agentgym.envs`, `sandboxes/` is
`agentgym.sandboxes`, `trainers/` is `agentgym.trainers`, and so on. Griffe
reads packages from the file system, where these folders are not inside
`agentgym/`, so once the `agentgym` package is loaded this extension loads
each mapped folder under its name in the namespace.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parents[2]


def package_dirs() -> dict[str, Path]:
    """The mapped subpackages and their folders, from `pyproject.toml`, parents first."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        mapping = tomllib.load(file)["tool"]["setuptools"]["package-dir"]
    names = sorted((name for name in mapping if "." in name), key=lambda name: name.count("."))
    return {name: ROOT / mapping[name] for name in names}


class PackageDirs(griffe.Extension):
    """Load the folders that `[tool.setuptools.package-dir]` maps into a loaded package."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for name, folder in package_dirs().items():
            top, _, rest = name.partition(".")
            if top != pkg.name or not (folder / "__init__.py").is_file():
                continue
            *parents, leaf = rest.split(".")
            parent = pkg
            for part in parents:
                parent = parent.get_member(part)
            module = loader._load_module(leaf, folder / "__init__.py", parent=parent)
            parent.set_member(leaf, module)
            loader.expand_exports(module)
            loader.expand_wildcards(module, external=False)
