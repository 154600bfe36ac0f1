"""``PageEnv``: a GUI environment whose screen is a page in the shared Chromium, one fresh page per episode."""

from __future__ import annotations

from typing import Any

from agentgym.envs.gui.browser_screen import BrowserScreen
from agentgym.envs.gui.env import GuiEnv
from agentgym.envs.web.browser import Browser, release_browser, retain_browser


class PageEnv(GuiEnv):
    """A :class:`GuiEnv` on a :class:`BrowserScreen`: a subclass's ``setup`` calls :meth:`open_screen` and shows
    or loads its page there; the browser is held from the first episode until the environment is closed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._browser: Browser | None = None
        self._screen: BrowserScreen | None = None

    @property
    def screen(self) -> BrowserScreen:
        if self._screen is None:
            raise RuntimeError("no episode is running: call reset() first")
        return self._screen

    async def open_screen(self, width: int, height: int, *, site: str | None = None) -> BrowserScreen:
        """End the last episode's page and open this one's (reaching only ``site``, if given)."""
        await self._end_episode()
        if self._browser is None:
            self._browser = retain_browser()
        self._screen = await BrowserScreen.open(self._browser, width, height, site=site)
        return self._screen

    async def aclose(self) -> None:
        await self._let_go()
        super().close()

    def close(self) -> None:
        if self._browser is not None:
            self._run_sync(self._let_go())
        super().close()

    async def _let_go(self) -> None:
        """End the episode, then give back the browser (the last holder closes it)."""
        await self._end_episode()
        browser, self._browser = self._browser, None
        if browser is not None:
            await release_browser(browser)

    async def _end_episode(self) -> None:
        screen, self._screen = self._screen, None
        if screen is not None:
            await screen.close()
