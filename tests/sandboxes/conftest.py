"""Sandbox fixtures: ``sandbox_of`` opens sandboxes of the backend that the ``backend`` fixture (tests/conftest.py)
names."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentgym.sandboxes import Sandbox, SandboxSpec, backend_module, open_sandbox


@pytest.fixture
def sandbox_of(backend: str) -> Iterator[Any]:
    """``sandbox_of(**spec_fields)`` opens a sandbox of the current backend; all are closed afterwards and
    the backend must hold none of them any more."""
    opened: list[Sandbox] = []

    def make(**fields: Any) -> Sandbox:
        sandbox = run(open_sandbox(backend, SandboxSpec(**fields)))
        opened.append(sandbox)
        return sandbox

    yield make
    for sandbox in opened:
        run(sandbox.close())
    assert not set(backend_module(backend).live()) & {s.id for s in opened}


def mounts_under(folder: Path) -> list[str]:
    """The host's mounts and loop devices whose paths are under ``folder`` (a sandbox's state folder)."""
    found = Path("/proc/mounts").read_text().splitlines()
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):  # detached meanwhile
            found.append(backing.read_text())
    return [line for line in found if str(folder) in line]


def run(coroutine: Any) -> Any:
    """Drive one coroutine to its end (the tests are synchronous)."""
    return asyncio.run(coroutine)
