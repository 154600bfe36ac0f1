"""Sandbox fixtures: each backend when its prerequisites are here (the Docker engine comes from the session's
``docker_engine`` fixture), skipped with the reason otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from agentgym.sandboxes import Sandbox, SandboxSpec, SandboxUnavailable, backend_module, open_sandbox


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> str:
    """Each backend in turn."""
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    else:
        try:
            backend_module("local").check()
        except SandboxUnavailable as exc:
            pytest.skip(str(exc))
    return request.param


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


def run(coroutine: Any) -> Any:
    """Drive one coroutine to its end (the tests are synchronous)."""
    return asyncio.run(coroutine)
