"""``PageEnv``: a GUI environment whose screen is a page in the shared Chromium, one fresh page per episode."""

from __future__ import annotations

from typing import Any

from agentgym.envs.gui.browser_screen import BrowserScreen
from agentgym.envs.gui.env import GuiEnv
from agentgym.envs.web.holder import BrowserHolder


class PageEnv(BrowserHolder, GuiEnv):
    """A :class:`GuiEnv` on a :class:`BrowserScreen`: a subclass's ``setup`` calls :meth:`open_screen` and shows
    or loads its page there; the browser is held from the first episode until the environment is closed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._screen: BrowserScreen | None = None

    @property
    def screen(self) -> BrowserScreen:
        if self._screen is None:
            raise RuntimeError("no episode is running: call reset() first")
        return self._screen

    async def open_screen(self, width: int, height: int, *, site: str | None = None) -> BrowserScreen:
        """End the last episode's page and open this one's (reaching only ``site``, if given)."""
        await self._end_episode()
        self._screen = await BrowserScreen.open(self.hold_browser(), width, height, site=site)
        return self._screen

    async def _end_episode(self) -> None:
        screen, self._screen = self._screen, None
        if screen is not None:
            await screen.close()
