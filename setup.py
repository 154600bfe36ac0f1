"""Finds agentgym's packages and their data under the folders that ``[tool.setuptools.package-dir]`` maps.

Everything else is in ``pyproject.toml``. setuptools' ``packages.find`` cannot name what it finds in ``envs/``
``agentgym.envs.*``, so the walk is here: a folder with an ``__init__.py`` under a package is a package, and
every other file under a package's folder (templates, static files, configs, image definitions) ships as its
data, the Python files of data folders (a Docker image's scripts) included.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import setup


def find_packages(package_dir: dict[str, str]) -> dict[str, Path]:
    """Each package's folder: the mapped roots and every folder with an ``__init__.py`` below packages."""
    packages: dict[str, Path] = {}
    for name, folder in package_dir.items():
        root = Path(folder)
        packages[name] = root
        for init in sorted(root.rglob("__init__.py")):
            inner = init.parent.relative_to(root).parts
            if all((root.joinpath(*inner[:depth]) / "__init__.py").is_file() for depth in range(1, len(inner))):
                packages[".".join([name, *inner])] = init.parent
    return packages


def find_package_data(packages: dict[str, Path]) -> dict[str, list[str]]:
    """Each package's data: the files under its folder that are neither its modules nor another package's."""
    folders = set(packages.values())
    data: dict[str, list[str]] = {}
    for name, folder in packages.items():
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            owner = next(parent for parent in path.parents if parent in folders)
            if owner == folder and not (path.parent == folder and path.suffix == ".py"):
                data.setdefault(name, []).append(path.relative_to(folder).as_posix())
    return data


with open("pyproject.toml", "rb") as file:
    PACKAGE_DIR: dict[str, str] = tomllib.load(file)["tool"]["setuptools"]["package-dir"]
PACKAGES = find_packages(PACKAGE_DIR)
setup(packages=sorted(PACKAGES), package_data=find_package_data(PACKAGES))
