"""What the environment suites share: the registered ids grouped by what they need to start, and the fixture
that provides it (a Docker engine with agentgym's images, or a skip naming why an MCP server cannot run)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import agentgym
from agentgym.registration import ADAPTED
from agentgym.sandboxes import SandboxUnavailable, choose_backend
from tests.conftest import docker_with_images

ALL_SPECS = [s for s in agentgym.list_envs() if s.entry_point.startswith("agentgym.")]
"""The environments agentgym ships, bundled and adapted (not those other test modules register)."""
SPECS = [s for s in ALL_SPECS if s.entry_point.startswith("agentgym.envs.") and ADAPTED not in s.tags]
"""The bundled environments (adapters of other packages' environments left out)."""
ON_DESKTOP = {s.id for s in ALL_SPECS if "desktop" in s.tags}
IN_BROWSER = {s.id for s in ALL_SPECS if "browser" in s.tags}
SERVED_BY_MCP = {s.id for s in ALL_SPECS if "mcp" in s.tags}
ON_REPOSITORY = {s.id for s in ALL_SPECS if "swe" in s.tags}
"""Environments whose episodes fix a repository in a container (and are graded by its tests in another)."""
IN_CONTAINER = ON_DESKTOP | ON_REPOSITORY
SLOW_TO_START = IN_BROWSER | IN_CONTAINER | SERVED_BY_MCP
IN_SANDBOX = {s.id for s in ALL_SPECS if "sandbox" in s.tags}
SANDBOX_TIMEOUT = 600
"""Seconds for a sandboxed env's test: 400 oracle and random episodes start a sandbox process per command,
about 55 s on 2 idle cores and past the default 120 s with other work beside them."""


def env_param(*values: object, slow: bool = False) -> object:
    """``values`` marked ``docker`` or ``browser`` where the env (the first value) needs one, with the
    sandboxed envs' timeout, and ``slow`` where asked."""
    env_id = values[0]
    marks = [pytest.mark.docker] if env_id in IN_CONTAINER else []
    marks += [pytest.mark.browser] if env_id in IN_BROWSER else []
    marks += [pytest.mark.timeout(SANDBOX_TIMEOUT)] if env_id in IN_SANDBOX else []
    marks += [pytest.mark.slow] if slow else []
    return pytest.param(*values, marks=marks)


@pytest.fixture
def env_prerequisites(request: pytest.FixtureRequest) -> Iterator[None]:
    """For a test parametrized by ``env_id``: a Docker engine with agentgym's images for an environment on a
    desktop or a repository, for that test only (sandboxed tool environments pick their backend as they would without it);
    an MCP environment skips, naming why, where no backend can run its server."""
    callspec = getattr(request.node, "callspec", None)
    env_id = callspec.params.get("env_id") if callspec is not None else None
    if env_id in SERVED_BY_MCP:
        try:
            choose_backend("auto", agentgym.spec(env_id).load().server.spec)
        except SandboxUnavailable as exc:
            pytest.skip(str(exc))
    if env_id not in IN_CONTAINER:
        yield
        return
    with docker_with_images():
        yield
