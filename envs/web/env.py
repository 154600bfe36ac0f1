"""The base of web environments: a bundled site, a real Chromium page per episode, BrowserGym-style tools.

The agent reads the page as its accessibility tree (Playwright's aria snapshot, each element with an id
such as ``e12``), the URL and, with ``screenshot=True``, an image of the page; it acts through tools that
name those ids. Every episode gets its own site session (its own cart, mail, bookings) and its own browser
context, so parallel episodes never see each other. Rewards come from the site's state, read by
:meth:`WebEnv.score` when the agent says it is done with ``send_msg_to_user``.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Protocol
from urllib.parse import urljoin, urlsplit

from agentgym.core import Env
from agentgym.envs.web.browser import NAVIGATION_TIMEOUT_MS, BrowserCrashed, page_failure
from agentgym.envs.web.holder import BrowserHolder
from agentgym.envs.web.page_images import images_loaded
from agentgym.envs.web.page_watch import PageWatch
from agentgym.envs.web.sites import OracleStep
from agentgym.errors import ToolError
from agentgym.messages import ContentPart, ImagePart, Message, TextPart
from agentgym.tools import tool

SNAPSHOT_LIMIT = 24_000
"""Characters of the accessibility tree shown per observation; the rest is cut with a note."""
_REF = re.compile(r"(?:f[0-9]+)?e[0-9]+")
"""An element id of an aria snapshot: ``e12``, or ``f1e12`` for an element of a later page or a frame."""

TOOLS_PROMPT = """You use a web browser. Each observation shows the page's URL and its accessibility tree, one
element per line as `role "name" [ref=e12]`; use those ids to act.
Tools:
- click(element): click the element with that id.
- fill(element, text): replace the text in a text box.
- select_option(element, value): choose an option (by its text or value) in a drop-down.
- press(key): press a key on the focused element, e.g. "Enter" or "Tab".
- scroll(dx, dy): scroll the page by that many pixels.
- goto(url): open a page of this site, e.g. "/cart".
- go_back(): go back one page.
- send_msg_to_user(text): say you are done (with your answer, if the task asks for one); the episode ends."""


class Site(Protocol):
    """A bundled web site: an ASGI app whose state is kept per session (selected by a cookie)."""

    name: str
    session_cookie: str

    def app(self) -> Any:
        """The ASGI application (made once per process)."""

    def new_session(self, state: Any = None) -> str:
        """A fresh session id; its state is ``state`` (an episode's starting mailbox or bookings) or empty."""

    def end_session(self, session: str) -> None:
        """Drop a session's state."""


class WebEnv(BrowserHolder, Env):
    """An episode on a bundled :class:`Site` in Chromium. A subclass names its :attr:`site`, writes ``setup``
    (draw a task, then ``await self.open_site()``), :meth:`score` and :meth:`oracle_steps`."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 1}
    execution = "inline"
    default_max_turns = 30
    start_path: ClassVar[str] = "/"
    forkable = "replay"
    """A child opens its own site session and page and replays the parent's actions: the bundled sites draw their
    state from the seed (no clock, no live data) and the accessibility tree of one page is the same each time."""

    def __init__(self, *, screenshot: bool = False, **kwargs: Any) -> None:
        """``screenshot``: each observation also carries a PNG of the page (for vision-language agents)."""
        super().__init__(**kwargs)
        self.screenshot = screenshot
        self.message: str | None = None
        """What the agent said with ``send_msg_to_user``."""
        self.snapshot = ""
        """The accessibility tree of the last observation."""
        self.page_text = ""
        """The text of the last observation: URL, title and the accessibility tree."""
        self.image: bytes | None = None
        """The PNG of the page at the last observation, when taken (``screenshot`` or ``render_mode="rgb_array"``)."""
        self.session: str | None = None
        self._page: Any = None
        self._watch: PageWatch | None = None

    @property
    def site(self) -> Site:
        """The site this environment's episodes run on."""
        raise NotImplementedError(f"{type(self).__name__} must name its site")

    def score(self) -> tuple[float, bool]:
        """The reward and success of the episode, read from the site's state for this session."""
        raise NotImplementedError(f"{type(self).__name__} must implement score()")

    def oracle_steps(self) -> Sequence[OracleStep]:
        """The oracle's actions in this episode, one a turn, the last ``send_msg_to_user``."""
        raise NotImplementedError(f"{type(self).__name__} has no oracle")

    def oracle_action(self) -> str:
        """This turn's step of :meth:`oracle_steps`, its element found by role and name on the current page."""
        steps = self.oracle_steps()
        tool, role, name, value = steps[min(self.turn, len(steps) - 1)]
        if tool == "send_msg_to_user":
            return self.format_call(tool, text=value)
        arguments = {"element": self.find(role, name)}
        if tool == "fill":
            arguments["text"] = value
        elif tool == "select_option":
            arguments["value"] = value
        return self.format_call(tool, **arguments)

    async def open_site(self, state: Any = None) -> list[ContentPart]:
        """Start this episode's site session (with ``state`` where the task gives the site one) and browser
        page at :attr:`start_path`; its first observation."""
        await self._end_episode()
        base = self.serve_site(self.site.name, self.site.app())
        browser = self.hold_browser()
        self.session = self.site.new_session(state)
        self.message = None
        self._page = await browser.open_page()
        self._watch = PageWatch(self._page)
        context = self._page.context
        await PageWatch.install(context)
        await context.add_cookies([{"name": self.site.session_cookie, "value": self.session, "url": base}])
        await context.route(lambda url: not url.startswith(base), lambda route: route.abort())
        await self._act("open the site", lambda: self._page.goto(base + self.start_path), mark=False)
        return await self.observe()

    async def observe(self) -> list[ContentPart]:
        """The page as the agent sees it, once its images have loaded: URL, title, accessibility tree (and a
        screenshot if asked)."""
        page = self._page
        try:
            await images_loaded(page)
            title = await page.title()
            tree = await page.aria_snapshot(mode="ai")
            shot = self.screenshot or self.render_mode == "rgb_array"
            self.image = await page.screenshot(type="png") if shot else None
        except Exception as exc:
            raise page_failure(self._browser, page, "read the page", exc) from exc
        if len(tree) > SNAPSHOT_LIMIT:
            tree = tree[:SNAPSHOT_LIMIT] + "\n[… the rest of the page is cut; scroll or open a narrower page]"
        self.snapshot = tree
        self.page_text = f"URL: {self.path}\nTitle: {title}\n{tree}"
        parts: list[ContentPart] = [TextPart(text=self.page_text)]
        if self.screenshot and self.image is not None:
            parts.append(ImagePart(data=base64.b64encode(self.image).decode()))
        return parts

    def render_frame(self) -> bytes | None:
        return self.image

    @property
    def path(self) -> str:
        """The current page's path and query on the site."""
        parts = urlsplit(self._page.url)
        return parts.path + (f"?{parts.query}" if parts.query else "")

    def find(self, role: str, name: str) -> str:
        """The id of the element with this role and exact accessible name in the last observation."""
        match = re.search(rf'- {re.escape(role)} "{re.escape(name)}"[^\n]*?\[ref=({_REF.pattern})\]', self.snapshot)
        if match is None:
            raise LookupError(f'no {role} "{name}" on the page')
        return match.group(1)

    # -- tools --------------------------------------------------------------------------------------

    @tool
    async def click(self, element: str) -> list[ContentPart]:
        """Click an element.

        Args:
            element: The element's id from the page, e.g. "e12".
        """
        locator = self._locate(element)
        await self._act(f"click {element}", lambda: locator.click(no_wait_after=True), after_input=True)
        return await self.observe()

    @tool
    async def fill(self, element: str, text: str) -> list[ContentPart]:
        """Replace the text in a text box.

        Args:
            element: The text box's id, e.g. "e7".
            text: The text to put there.
        """
        locator = self._locate(element)
        await self._act(f"fill {element}", lambda: locator.fill(text))
        return await self.observe()

    @tool
    async def select_option(self, element: str, value: str) -> list[ContentPart]:
        """Choose an option in a drop-down list.

        Args:
            element: The drop-down's id, e.g. "e9".
            value: The option's text or value.
        """
        locator = self._locate(element)
        await self._act(f"select {value!r} in {element}", lambda: locator.select_option(value))
        return await self.observe()

    @tool
    async def press(self, key: str) -> list[ContentPart]:
        """Press a key (or a combination such as "Control+A") on the focused element.

        Args:
            key: A key name such as "Enter", "Tab", "ArrowDown" or "a".
        """
        await self._act(f"press {key}", lambda: self._page.keyboard.press(key), after_input=True)
        return await self.observe()

    @tool
    async def scroll(self, dx: int, dy: int) -> list[ContentPart]:
        """Scroll the page.

        Args:
            dx: Pixels to the right (negative: left).
            dy: Pixels down (negative: up).
        """
        await self._act("scroll", lambda: self._page.mouse.wheel(dx, dy), after_input=True)
        return await self.observe()

    @tool
    async def goto(self, url: str) -> list[ContentPart]:
        """Open a page of this site.

        Args:
            url: A path such as "/cart", or a full address on this site.
        """
        assert self._base is not None
        target = urljoin(self._base + "/", url)
        if urlsplit(target).netloc != urlsplit(self._base).netloc or urlsplit(target).scheme != "http":
            raise ToolError(f"goto is limited to this site; {url!r} is elsewhere. Use a path such as \"/\".")
        await self._act(f"open {url}", lambda: self._page.goto(target))
        return await self.observe()

    @tool
    async def go_back(self) -> list[ContentPart]:
        """Go back to the previous page."""
        await self._act("go back", self._page.go_back)
        return await self.observe()

    @tool
    async def send_msg_to_user(self, text: str) -> str:
        """Say you are done, with your answer if the task asks for one. The episode ends.

        Args:
            text: Your message, e.g. "I placed the order." or the answer asked for.
        """
        self.message = text
        reward, success = self.score()
        self.finish(success=success, reward=reward)
        return "Done. " + ("The task is complete." if success else "The task is not complete.")

    # -- plumbing -----------------------------------------------------------------------------------

    def _locate(self, element: str) -> Any:
        if not _REF.fullmatch(element):
            raise ToolError(f"{element!r} is not an element id; ids look like \"e12\" (see the page)")
        if f"[ref={element}]" not in self.snapshot:
            raise ToolError(f"there is no element {element} on this page; use an id from the latest page\n\n"
                            f"{self.page_text}")
        return self._page.locator(f"aria-ref={element}")

    async def _act(self, what: str, action: Callable[[], Awaitable[Any]], *, after_input: bool = False,
                   mark: bool = True) -> None:
        """Run a Playwright action, then wait for the page it led to (see :class:`PageWatch`): a mistake (no
        such element, not editable, timed out) is the agent's and becomes a :class:`ToolError` carrying the
        page; a dead browser is a :class:`BrowserCrashed`. ``after_input``: the action is a mouse or keyboard
        input, which the page handles after Playwright returns; ``mark``: the page has a document to compare
        with."""
        assert self._watch is not None
        try:
            if mark:
                await self._watch.mark()
            await action()
            await self._watch.settle(timeout=NAVIGATION_TIMEOUT_MS / 1000, after_input=after_input)
        except Exception as exc:
            failure = page_failure(self._browser, self._page, what, exc)
            if isinstance(failure, BrowserCrashed):
                raise failure from exc
            await self.observe()
            raise ToolError(f"{failure}\n\n{self.page_text}") from None

    async def _end_episode(self) -> None:
        page, self._page, self._watch = self._page, None, None
        if page is not None and self._browser is not None:
            await self._browser.close_page(page)
        if self.session is not None:
            self.site.end_session(self.session)
            self.session = None


def opening(instruction: str, page: list[ContentPart]) -> list[Message]:
    """The opening messages of a web episode: the tools, then the task and the first page."""
    first = page[0]
    assert isinstance(first, TextPart)
    content: list[ContentPart] = [TextPart(text=f"{instruction}\n\n{first.text}"), *page[1:]]
    return [Message(role="system", content=TOOLS_PROMPT), Message(role="user", content=content)]
