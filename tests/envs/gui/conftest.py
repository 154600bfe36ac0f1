"""A module's browser tests may share one event loop and its Chromium."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agentgym.envs.web.browser import release_browser, retain_browser


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.Runner]:
    """An event loop for the module's scenarios (``loop.run(coroutine)``), which keeps its Chromium between
    them."""
    runner = asyncio.Runner()

    async def hold():
        return retain_browser()

    browser = runner.run(hold())
    try:
        yield runner
    finally:
        runner.run(release_browser(browser))
        runner.close()
