"""``BrowserHolder``: how an environment that holds the shared Chromium, and maybe a served site, lets them go."""

from __future__ import annotations

from typing import Any

from agentgym.envs.web.browser import Browser, release_browser, retain_browser
from agentgym.envs.web.server import serve, unserve


class BrowserHolder:
    """A mixin for an :class:`~agentgym.Env` (listed before it) that takes the shared browser with
    :meth:`hold_browser` and serves a site with :meth:`serve_site`; closing ends the episode
    (:meth:`_end_episode`), then gives back both (the last holder of each closes it)."""

    _browser: Browser | None = None
    _base: str | None = None
    """The served site's base URL, while this environment holds it."""
    _site_name: str | None = None

    def hold_browser(self) -> Browser:
        """The shared browser, taken on the first call."""
        if self._browser is None:
            self._browser = retain_browser()
        return self._browser

    def serve_site(self, name: str, app: Any) -> str:
        """The base URL of site ``name`` (the ASGI ``app``), served from the first call on."""
        if self._base is None:
            self._base, self._site_name = serve(name, app), name
        return self._base

    async def aclose(self) -> None:
        await self._let_go()
        super().close()  # type: ignore[misc]

    def close(self) -> None:
        if self._browser is not None or self._base is not None:
            self._run_sync(self._let_go())  # type: ignore[attr-defined]
        super().close()  # type: ignore[misc]

    async def _end_episode(self) -> None:
        """Close the current episode's page (and whatever else it holds)."""
        raise NotImplementedError

    async def _let_go(self) -> None:
        """End the episode, then give back the browser and the site."""
        await self._end_episode()
        browser, self._browser = self._browser, None
        if browser is not None:
            await release_browser(browser)
        if self._site_name is not None:
            name, self._base, self._site_name = self._site_name, None, None
            unserve(name)
