"""The wheel as a user installs it: built from the sdist of a copy of the checkout, it holds every file of the
package folders under its ``agentgym.*`` name and nothing else, and its entry points resolve from it alone.

Every other test runs on the editable install, which reads the source tree; only these see what ships.
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


@dataclass(frozen=True)
class Built:
    """What ``python -m build`` made from the copy of the checkout."""

    sources: list[str]  # the copied files, relative to the root
    wheel: Path
    sdist: Path


def _checkout_files() -> list[str]:
    """The files a build of the checkout sees: tracked, and untracked but not ignored."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    return sorted(name for name in set(listed.split("\0")) if name and (ROOT / name).is_file())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The sdist and the wheel built from it, of a copy of the checkout (so no build folder lands in it)."""
    tree, dist = tmp_path_factory.mktemp("checkout"), tmp_path_factory.mktemp("dist")
    sources = _checkout_files()
    for name in sources:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)
    build = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(tree)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,), (sdist,) = dist.glob("*.whl"), dist.glob("*.tar.gz")
    return Built(sources, wheel, sdist)


def _installed_name(source: str) -> str | None:
    """Where a file of the checkout lands in the wheel, or None when it is outside the package folders."""
    path = PurePosixPath(source)
    for package, folder in PACKAGE_DIR.items():
        if path.is_relative_to(folder):
            return str(PurePosixPath(*package.split("."), path.relative_to(folder)))
    return None


def test_the_wheel_holds_every_file_of_the_package_folders_and_nothing_else(built):
    expected = {name for name in map(_installed_name, built.sources) if name is not None}
    with zipfile.ZipFile(built.wheel) as wheel:
        shipped = {name for name in wheel.namelist() if ".dist-info/" not in name}
    assert sorted(expected - shipped) == [], "missing from the wheel"
    assert sorted(shipped - expected) == [], "in the wheel but not in the checkout's package folders"


def test_the_wheel_holds_the_mux_package_and_the_bundled_configs(built):
    """The two that a hand-kept package list once left out (issue 47)."""
    with zipfile.ZipFile(built.wheel) as wheel:
        names = set(wheel.namelist())
    assert {"agentgym/trainers/mux/__init__.py", "agentgym/trainers/mux/cli.py",
            "agentgym/trainers/configs/quickstart.yaml", "agentgym/trainers/configs/sft-quickstart.yaml"} <= names


RESOLVE = """
import configparser, importlib.util, json, sys
def origin(value):
    spec = importlib.util.find_spec(value.strip().partition(":")[0])
    return spec and spec.origin
points = configparser.ConfigParser(delimiters="=")
points.read_string(sys.stdin.read())
print(json.dumps({f"{group}:{name}": origin(value) for group in points.sections() for name, value in points[group].items()}))
"""
"""Finds (without running it) the module of each entry point read from stdin: its file, by group:name."""


def test_every_entry_points_module_is_found_in_the_wheel_alone(built, tmp_path):
    site = tmp_path / "site"
    with zipfile.ZipFile(built.wheel) as wheel:
        wheel.extractall(site)
        entry_points = next(wheel.read(name).decode() for name in wheel.namelist()
                            if name.endswith(".dist-info/entry_points.txt"))
    # The dependencies come from this interpreter's environment; agentgym comes from the wheel, first on the path
    # (the editable install's finder is consulted only after the path), and the working folder is not the checkout.
    resolved = subprocess.run([sys.executable, "-c", RESOLVE], input=entry_points, cwd=tmp_path, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(site)})
    assert resolved.returncode == 0, resolved.stderr
    files = json.loads(resolved.stdout)
    expected = configparser.ConfigParser(delimiters="=")
    expected.read_string(entry_points)
    assert sorted(files) == sorted(f"{group}:{name}" for group in expected.sections() for name in expected[group])
    assert "agentgym.commands:mux" in files and "console_scripts:agentgym" in files
    assert [point for point, file in files.items() if file is None or not Path(file).is_relative_to(site)] == []
