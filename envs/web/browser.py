"""One Chromium per event loop, shared by the browser environments on it; a fresh context per episode.

Chromium comes from the system (Debian's ``chromium``), driven through Playwright's async API; Playwright's
own browser downloads are never used. Contexts are made ahead (``warm`` of them) so an episode does not
wait for one. A browser that crashes or is killed is relaunched for the next episode; the episodes it was
serving fail with :class:`BrowserCrashed`, which the rollout records as an infrastructure error. Chromium is
labelled with the process that launched it; the first launch in a process kills those whose launcher died
(:mod:`agentgym.envs.web.orphans`), and a close that hangs kills its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from typing import Any

from agentgym.envs.web.orphans import kill_browser, label_args, reap_at_start_up
from agentgym.errors import AgentGymError, ToolError
from agentgym.loop_shared import LoopShared

CHROMIUM_ENV = "AGENTGYM_CHROMIUM"
"""Names the Chromium executable instead of the first of ``chromium`` and ``chromium-browser`` on PATH."""
INSTALL = "apt-get install -y chromium && pip install 'agentgym[web]'"
LAUNCH_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
               "--disable-default-apps", "--disable-extensions", "--mute-audio", "--disable-breakpad",
               "--disable-crash-reporter", "--disable-partial-raster")
"""Chromium runs in a container or sandbox of its own where one is wanted, so without its setuid sandbox;
nothing reaches out to Google's services. Without partial raster, a screenshot of the same page is the same
bytes however the page got there (re-rastering only the changed part of a tile can shift anti-aliasing)."""
VIEWPORT = {"width": 1280, "height": 800}
ACTION_TIMEOUT_MS = 10_000
"""How long an action waits for its element to be ready (visible, enabled, still) before it fails. It is
generous: a busy machine with many pages in flight can take seconds, and an element that is not on the page
at all is refused before any wait."""
NAVIGATION_TIMEOUT_MS = 15_000
CLOSE_TIMEOUT = 10.0
"""Seconds closing a context or the browser may take before it counts as hung."""


class BrowserUnavailable(AgentGymError):
    """Playwright or Chromium is missing here; the message names the install step."""


class BrowserCrashed(AgentGymError):
    """The browser died under an episode: an infrastructure failure, not the agent's."""


def page_failure(browser: Browser | None, page: Any, what: str, exc: Exception) -> BrowserCrashed | ToolError:
    """What a failed action on ``page`` means: :class:`BrowserCrashed` when the browser or the page is gone,
    otherwise the agent's mistake, a :class:`ToolError` with Playwright's message (without its call log)."""
    if browser is None or not browser.connected or page.is_closed():
        return BrowserCrashed(f"the browser died while trying to {what}: {playwright_message(exc)}")
    return ToolError(f"could not {what}: {playwright_message(exc)}")


def playwright_message(exc: Exception) -> str:
    """The first line of a Playwright error's message, without its call log."""
    text = str(exc).split("Call log:")[0].strip()
    return text.splitlines()[0].removeprefix("Locator.").strip() if text else type(exc).__name__


def chromium_path() -> str:
    """The Chromium executable to launch; raises :class:`BrowserUnavailable` when there is none."""
    path = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        raise BrowserUnavailable(f"no Chromium found (set {CHROMIUM_ENV} or: {INSTALL})")
    return path


def has_chromium() -> bool:
    """Whether a Chromium and Playwright are installed here (a Ray node's ``chromium`` label)."""
    try:
        chromium_path()
        import playwright  # noqa: F401
    except (BrowserUnavailable, ImportError):
        return False
    return True


class Browser:
    """A Chromium and a few fresh contexts kept ready. :meth:`open_page` gives each episode a page in a
    context of its own (cookies, storage and cache are never shared); :meth:`close_page` ends it."""

    def __init__(self, *, warm: int = 2) -> None:
        self.warm = warm
        self.id = uuid.uuid4().hex[:12]
        """Labels this browser's Chromium processes (see :mod:`agentgym.envs.web.orphans`)."""
        self.launches = 0
        """How many times Chromium was started (more than one: it crashed and was relaunched)."""
        self._playwright: Any = None
        self._browser: Any = None
        self._ready: list[Any] = []
        self._fillers: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    async def open_page(self, *, viewport: dict[str, int] | None = None) -> Any:
        """A page in a fresh context (launching or relaunching Chromium when needed)."""
        context = None
        while self._ready and context is None:
            candidate = self._ready.pop()
            if self.connected and candidate.browser is self._browser and candidate.pages:
                context = candidate  # not one of a browser that died since
        if context is None:
            context = await self._new_context()
        self._refill()
        page = context.pages[0]
        if viewport is not None and viewport != VIEWPORT:
            await page.set_viewport_size(viewport)
        return page

    async def close_page(self, page: Any) -> None:
        """Close the page's context and everything in it; a context of a crashed browser is already gone."""
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await page.context.close()
        except Exception as exc:
            if self.connected:
                raise BrowserCrashed(f"could not close a browser context: {exc!r}") from exc

    @property
    def connected(self) -> bool:
        """Whether Chromium is up."""
        return self._browser is not None and self._browser.is_connected()

    async def close(self) -> None:
        """Close every context, Chromium and the Playwright driver; safe to call twice. Each step is bounded
        by :data:`CLOSE_TIMEOUT`; a Chromium that outlives them is killed with its process group."""
        for filler in self._fillers:
            filler.cancel()
        await asyncio.gather(*self._fillers, return_exceptions=True)
        self._ready.clear()
        browser, playwright, self._browser, self._playwright = self._browser, self._playwright, None, None
        if browser is not None and browser.is_connected():
            with contextlib.suppress(TimeoutError):  # stopping the driver below takes the browser down too
                async with asyncio.timeout(CLOSE_TIMEOUT):
                    await browser.close()
        if playwright is not None:
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT):
                    await playwright.stop()
            except TimeoutError:
                kill_browser(self.id)

    async def _new_context(self) -> Any:
        browser = await self._launched()
        try:
            context = await browser.new_context(viewport=VIEWPORT, service_workers="block")
            context.set_default_timeout(ACTION_TIMEOUT_MS)
            context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
            await context.new_page()
        except Exception as exc:
            if not browser.is_connected():
                raise BrowserCrashed(f"the browser died while opening a context: {exc}") from exc
            raise
        return context

    async def _launched(self) -> Any:
        async with self._lock:
            if self.connected:
                return self._browser
            if self._playwright is None:
                try:
                    from playwright.async_api import async_playwright
                except ImportError as exc:
                    raise BrowserUnavailable(f"Playwright is not installed: {INSTALL}") from exc
                self._playwright = await async_playwright().start()
            reap_at_start_up()
            self._browser = await self._playwright.chromium.launch(
                executable_path=chromium_path(), args=[*LAUNCH_ARGS, *label_args(self.id)], headless=True)
            self.launches += 1
            return self._browser

    def _refill(self) -> None:
        for _ in range(max(0, self.warm - len(self._ready) - len(self._fillers))):
            task = asyncio.get_running_loop().create_task(self._warm_one())
            self._fillers.add(task)
            task.add_done_callback(self._fillers.discard)

    async def _warm_one(self) -> None:
        try:
            self._ready.append(await self._new_context())
        except Exception:  # noqa: BLE001 (warming is best effort; the next open_page reports the cause)
            return


_SHARED: LoopShared[Browser] = LoopShared(Browser.close)


def retain_browser() -> Browser:
    """The browser shared on the running event loop; match each call with one :func:`release_browser`."""
    return _SHARED.retain("chromium", Browser)


async def release_browser(browser: Browser) -> None:
    """Let go of a browser from :func:`retain_browser`; the last holder closes it."""
    await _SHARED.release(browser)
