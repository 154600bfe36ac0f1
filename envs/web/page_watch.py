"""Knowing when a browser action is over, so that the next observation shows the page it led to.

Playwright's mouse and keyboard calls return once Chromium took the input, which can be before the page
handled it: a page read right then may not yet show the click's effect, or show the page a link is
leaving. Every document runs :data:`WATCH_SCRIPT`, which counts the inputs it handled and marks the moment a
form is submitted or a link followed; :meth:`PageWatch.settle` waits until the page has handled the input
and, when it is leaving, until the next page has loaded.
"""

from __future__ import annotations

import asyncio
from typing import Any

WATCH_SCRIPT = """(() => {
  if (window.__agentgym) return;
  const state = { leaving: false, inputs: 0, doc: Math.random().toString(36).slice(2) };
  Object.defineProperty(window, "__agentgym", { value: state });
  const leaving = () => { state.leaving = true; };
  addEventListener("submit", (e) => { if (!e.defaultPrevented) leaving(); });
  addEventListener("click", (e) => {
    const link = e.target instanceof Element ? e.target.closest("a[href]") : null;
    if (link && !e.defaultPrevented && !link.getAttribute("href").startsWith("#")) leaving();
  });
  addEventListener("beforeunload", leaving);
  for (const type of ["mouseup", "keyup", "wheel"]) addEventListener(type, () => { state.inputs += 1; }, true);
})();"""
"""Run in every document: counts the mouse releases, key releases and wheel turns it handled, and marks
leaving (a form submitted, a link followed, an unload) before the navigation starts."""
_MARK = "() => window.__agentgym ? [window.__agentgym.doc, window.__agentgym.inputs] : [null, 0]"
_SETTLED = """([doc, inputs, patience]) => new Promise((resolve) => {
  const state = window.__agentgym;
  if (!state || state.doc !== doc) return resolve(true);
  const deadline = Date.now() + patience;
  const poll = () => {
    if (state.leaving || inputs === null || state.inputs > inputs || Date.now() > deadline) {
      resolve(state.leaving);
    } else {
      setTimeout(poll, 5);
    }
  };
  poll();
})"""
"""Resolves to whether the page is leaving, once the document has handled an input after ``inputs`` (or at
once when ``inputs`` is null); a different document than ``doc`` means the page was already left."""
INPUT_PATIENCE_MS = 2_000
"""How long to wait for the page to handle an input before reading it anyway (an input can land nowhere)."""


class PageWatch:
    """Watches one page: counts its main frame's navigations, and remembers the document and its input
    count as of the last :meth:`mark`, so that :meth:`settle` knows what an action changed."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self._navigations = 0
        self._navigated = asyncio.Event()
        self._doc: str | None = None
        self._inputs = 0
        self._marked_navigations = 0
        page.on("framenavigated", self._count)

    @staticmethod
    async def install(context: Any) -> None:
        """Run :data:`WATCH_SCRIPT` in every document of ``context`` from now on."""
        await context.add_init_script(script=WATCH_SCRIPT)

    async def mark(self) -> None:
        """Note the current document and how many inputs it handled (call before an action)."""
        self._doc, self._inputs = await self.page.evaluate(_MARK)
        self._marked_navigations = self._navigations

    async def settle(self, *, timeout: float, after_input: bool) -> None:
        """Wait until the page handled the action since the last :meth:`mark` (``after_input``: a mouse or
        keyboard input, which the page handles later) and, if it is leaving, the next page has loaded."""
        before = self._marked_navigations
        async with asyncio.timeout(timeout):
            try:
                leaving = await self.page.evaluate(
                    _SETTLED, [self._doc, self._inputs if after_input else None, INPUT_PATIENCE_MS])
            except Exception:  # noqa: BLE001 (the document went away under the evaluation: it is leaving)
                leaving = True
            if leaving or self._navigations > before:
                while self._navigations == before:
                    self._navigated.clear()
                    await self._navigated.wait()
                await self.page.wait_for_load_state()

    def _count(self, frame: Any) -> None:
        if frame == self.page.main_frame:
            self._navigations += 1
            self._navigated.set()
