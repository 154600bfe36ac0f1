"""Browser tests skip without Chromium and Playwright; a module's tests may share one event loop and its
Chromium."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agentgym.envs.web.browser import BrowserUnavailable, chromium_path, release_browser, retain_browser


@pytest.fixture(autouse=True)
def chromium(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("browser") is None:
        return
    try:
        chromium_path()
        import playwright  # noqa: F401
    except (BrowserUnavailable, ImportError) as exc:
        pytest.skip(str(exc))


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
