"""Gymnasium's own checker (``gymnasium.utils.env_checker.check_env``) on every environment agentgym registers,
with its default arguments: bundled and adapted, desktop, repository, web, widget, MiniWoB++ and TextArena included.

The 200-odd checks run once, in worker processes a few at a time (:func:`~agentgym.check_pool.check_envs`, as
``agentgym check --all --only gymnasium`` runs them), then each environment's outcome is a test of its own.
They took 22 minutes on two cores with other work beside them, so they have a step of their own:
``bash scripts/test.sh -m conformance``. The desktop and repository environments need the Docker engine and
agentgym's images; without them those skip, naming why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from agentgym.check_pool import CheckOutcome, check_envs
from tests.conftest import docker_with_images
from tests.envs.conftest import ALL_SPECS, IN_CONTAINER

CONCURRENCY = 4
"""Checks at once: most of a check's time is a browser or a sandbox starting, not this process's CPU."""
pytestmark = [pytest.mark.conformance, pytest.mark.timeout(3 * 3600)]
"""The first test waits for every check; the step's time is bounded by CI's, not by a test's."""


@pytest.fixture(scope="module")
def outcomes() -> Iterator[tuple[dict[str, CheckOutcome], str | None]]:
    """Every environment's outcome of Gymnasium's checker, and why those in containers (desktops, repositories)
    were not checked (no engine or image) if they were not."""
    with contextlib.ExitStack() as stack:
        no_engine = None
        try:
            stack.enter_context(docker_with_images())
        except pytest.skip.Exception as exc:
            no_engine = str(exc)
        specs = [s for s in ALL_SPECS if no_engine is None or s.id not in IN_CONTAINER]
        checked = check_envs(specs, episodes=1, concurrency=CONCURRENCY, only=("gymnasium",))
        yield {outcome.env_id: outcome for outcome in checked}, no_engine


def test_every_family_is_among_those_checked():
    families = {s.id.split("/")[0] for s in ALL_SPECS}
    assert {"games", "tools", "web", "gui", "miniwob", "textarena", "gymnasium", "mcp", "swe"} <= families
    assert len(ALL_SPECS) > 200


@pytest.mark.parametrize("env_id", [s.id for s in ALL_SPECS])
def test_gymnasiums_checker_passes(env_id, outcomes):
    checked, no_engine = outcomes
    if env_id not in checked:
        pytest.skip(f"no container to check it in: {no_engine}")
    outcome = checked[env_id]
    assert outcome.ok and outcome.passed == ("gymnasium",), "\n".join(outcome.failures)
