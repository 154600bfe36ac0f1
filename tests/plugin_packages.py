"""Packages of tests/fixtures that extend agentgym through an entry-point group, installed as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def install(name: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package ``tests/fixtures/<name>`` installed by pip into a directory of its own (built from a copy: pip
    leaves its build files beside the sources); returns that directory."""
    source, target = tmp_path_factory.mktemp("source") / name, tmp_path_factory.mktemp("site")
    shutil.copytree(ROOT / "tests" / "fixtures" / name, source)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-compile", "--target", str(target), str(source)], check=True)
    return target


def make_visible(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Let this process import from ``site`` and, through ``PYTHONPATH``, the commands and Ray actors it starts."""
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT)]))
