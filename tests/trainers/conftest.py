"""Fixtures of the trainer's tests: a command-line run in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def agentgym_process(tmp_path):
    """Start ``python -m agentgym ARGS`` with its output in a log file; whatever is left running is killed."""
    started: list[subprocess.Popen] = []

    def start(*args: str, log: str) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with (tmp_path / log).open("w") as out:
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", "agentgym", *args], env=env, stdout=out, stderr=subprocess.STDOUT
                )
            )
        return started[-1]

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()
