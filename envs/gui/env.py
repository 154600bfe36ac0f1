"""The base of GUI environments: a screenshot in, mouse and keyboard at pixel coordinates out.

Every observation carries a PNG of the screen as an image part (for vision-language agents) and, unless
``accessibility=False``, a text list of what is on the screen with the centre of each element, so that a
text-only agent can act by coordinates too. The tools are the same on every :class:`Screen`: a page in
Chromium (tier 1, :mod:`agentgym.envs.gui.widgets`) or an X desktop in a sandbox (tier 2,
:mod:`agentgym.envs.gui.desktop`). Rewards come from the state behind the screen (the page's widgets, the
files and applications of the desktop), read by :meth:`GuiEnv.score` when the agent calls ``done``.
"""

from __future__ import annotations

import base64
import re
from typing import Any, ClassVar, Protocol

from agentgym.core import Env
from agentgym.envs.gui.keys import parse_combo
from agentgym.errors import ToolError
from agentgym.messages import ContentPart, ImagePart, Message, TextPart
from agentgym.tools import tool

TYPE_LIMIT = 2_000
"""The most characters one ``type`` call may enter."""
UNTYPABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters no key types (line breaks and tabs are typed as Enter and Tab)."""
SCROLL_LIMIT = 5_000
"""The most pixels one ``scroll`` call may move in each direction."""

TOOLS_PROMPT = """You use a computer through its screen. Each observation is a screenshot{tree}.
Coordinates are pixels from the top-left corner of the screen, x to the right and y down.
Tools:
- click(x, y): left-click at that point.
- double_click(x, y): double-click at that point.
- right_click(x, y): right-click at that point.
- type(text): type text at the keyboard focus.
- key(combo): press a key or a combination, e.g. "Enter", "ctrl+s", "ctrl+shift+t".
- drag(x1, y1, x2, y2): press the mouse at (x1, y1), move to (x2, y2) and release.
- scroll(x, y, dx, dy): scroll at (x, y) by dx pixels right and dy pixels down (negative: left, up).
- done(): say the task is finished; the episode ends and is scored."""
TREE_NOTE = (" and a list of the elements on it, one per line as `role \"name\" (x, y)` where (x, y) is "
             "the element's centre")
_ELEMENT = re.compile(r'^\s*- (?P<role>[\w-]+) "(?P<name>(?:[^"\\]|\\.)*)"[^\n]*?\((?P<x>-?\d+), (?P<y>-?\d+)\)',
                      re.MULTILINE)


class Screen(Protocol):
    """Where a GUI episode happens: a display of :attr:`width` x :attr:`height` pixels with a mouse and a
    keyboard. Methods raise :class:`ToolError` for the agent's mistakes and any other error for a broken
    display (an infrastructure failure)."""

    width: int
    height: int

    async def click(self, x: int, y: int, *, button: str = "left", count: int = 1) -> None:
        """Click ``count`` times with ``button`` (``left``, ``right`` or ``middle``) at (x, y)."""

    async def type(self, text: str) -> None:
        """Type ``text`` at the keyboard focus."""

    async def key(self, keys: tuple[str, ...]) -> None:
        """Press a combination given as canonical key names (see :mod:`agentgym.envs.gui.keys`)."""

    async def drag(self, x1: int, y1: int, x2: int, y2: int) -> None:
        """Press the left button at (x1, y1), move to (x2, y2) in steps, release."""

    async def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        """Scroll by (dx, dy) pixels with the pointer at (x, y)."""

    async def screenshot(self) -> bytes:
        """The screen as a PNG of :attr:`width` x :attr:`height`."""

    async def elements(self) -> str:
        """What is on the screen as text, one element per line: ``- role "name" (x, y)``, the centre."""


class GuiEnv(Env):
    """An episode on a :class:`Screen`. A subclass starts the screen in ``setup`` (then returns
    ``gui_opening(instruction, await self.observe())``), names it as :attr:`screen`, and writes :meth:`score`;
    its oracle may use :meth:`center` to find an element it means to click."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 1}
    execution = "inline"
    default_max_turns = 15
    forkable = "replay"
    """A child starts its own screen and replays the parent's actions, its screenshots compared byte for byte: the
    widget pages run no timer or animation, and the desktop shows none (see its environment's notes)."""

    def __init__(self, *, accessibility: bool = True, **kwargs: Any) -> None:
        """``accessibility``: observations also list the screen's elements with their centres (for text-only
        agents); the screenshot is always there."""
        super().__init__(**kwargs)
        self.accessibility = accessibility
        self.elements = ""
        """The element list of the last observation (kept for the oracle even when not shown)."""
        self.image = b""
        """The PNG of the last observation."""

    @property
    def screen(self) -> Screen:
        """The current episode's screen."""
        raise NotImplementedError(f"{type(self).__name__} must name its screen")

    async def score(self) -> tuple[float, bool]:
        """The reward and success of the episode, read from the state behind the screen."""
        raise NotImplementedError(f"{type(self).__name__} must implement score()")

    async def observe(self) -> list[ContentPart]:
        """The screen now: a line of size, the element list when shown, and the screenshot."""
        screen = self.screen
        self.elements = await screen.elements()
        self.image = await screen.screenshot()
        text = f"Screen: {screen.width}x{screen.height}"
        if self.accessibility:
            text += f"\n{self.elements}"
        return [TextPart(text=text), ImagePart(data=base64.b64encode(self.image).decode())]

    def render_frame(self) -> bytes | None:
        return self.image or None

    def center(self, role: str, name: str) -> tuple[int, int]:
        """The centre of the first element with this role and exact name in the last observation."""
        for match in _ELEMENT.finditer(self.elements):
            if match["role"] == role and match["name"].replace('\\"', '"') == name:
                return int(match["x"]), int(match["y"])
        raise LookupError(f'no {role} "{name}" on the screen')

    def tools_prompt(self) -> str:
        """The system prompt that lists the tools (it mentions the element list when it is shown)."""
        return TOOLS_PROMPT.format(tree=TREE_NOTE if self.accessibility else "")

    # -- tools --------------------------------------------------------------------------------------

    @tool
    async def click(self, x: int, y: int) -> list[ContentPart]:
        """Left-click at a point of the screen.

        Args:
            x: Pixels from the left edge.
            y: Pixels from the top edge.
        """
        await self.screen.click(*self._point(x, y))
        return await self.observe()

    @tool
    async def double_click(self, x: int, y: int) -> list[ContentPart]:
        """Double-click at a point of the screen.

        Args:
            x: Pixels from the left edge.
            y: Pixels from the top edge.
        """
        await self.screen.click(*self._point(x, y), count=2)
        return await self.observe()

    @tool
    async def right_click(self, x: int, y: int) -> list[ContentPart]:
        """Right-click at a point of the screen.

        Args:
            x: Pixels from the left edge.
            y: Pixels from the top edge.
        """
        await self.screen.click(*self._point(x, y), button="right")
        return await self.observe()

    @tool
    async def type(self, text: str) -> list[ContentPart]:
        """Type text at the keyboard focus.

        Args:
            text: The characters to type.
        """
        if len(text) > TYPE_LIMIT:
            raise ToolError(f"type takes at most {TYPE_LIMIT} characters at once, got {len(text)}")
        if (control := UNTYPABLE.search(text)) is not None:
            raise ToolError(f"type cannot type the control character {control.group()!r}; use key for special keys")
        await self.screen.type(text)
        return await self.observe()

    @tool
    async def key(self, combo: str) -> list[ContentPart]:
        """Press a key or a key combination.

        Args:
            combo: Such as "Enter", "Tab", "ctrl+a" or "ctrl+shift+t".
        """
        await self.screen.key(parse_combo(combo))
        return await self.observe()

    @tool
    async def drag(self, x1: int, y1: int, x2: int, y2: int) -> list[ContentPart]:
        """Drag with the left button from one point to another.

        Args:
            x1: Start, pixels from the left edge.
            y1: Start, pixels from the top edge.
            x2: End, pixels from the left edge.
            y2: End, pixels from the top edge.
        """
        await self.screen.drag(*self._point(x1, y1), *self._point(x2, y2))
        return await self.observe()

    @tool
    async def scroll(self, x: int, y: int, dx: int, dy: int) -> list[ContentPart]:
        """Scroll with the pointer at a point.

        Args:
            x: Pointer position, pixels from the left edge.
            y: Pointer position, pixels from the top edge.
            dx: Pixels to scroll right (negative: left).
            dy: Pixels to scroll down (negative: up).
        """
        if max(abs(dx), abs(dy)) > SCROLL_LIMIT:
            raise ToolError(f"scroll moves at most {SCROLL_LIMIT} pixels each way at once")
        await self.screen.scroll(*self._point(x, y), dx, dy)
        return await self.observe()

    @tool
    async def done(self) -> str:
        """Say the task is finished. The episode ends and is scored."""
        reward, success = await self.score()
        self.finish(success=success, reward=reward)
        return "Done. " + ("The task is complete." if success else "The task is not complete.")

    def _point(self, x: int, y: int) -> tuple[int, int]:
        width, height = self.screen.width, self.screen.height
        if not (0 <= x < width and 0 <= y < height):
            raise ToolError(f"({x}, {y}) is off the screen, which is {width}x{height} (x from 0 to {width - 1}, "
                            f"y from 0 to {height - 1})")
        return x, y


def gui_opening(env: GuiEnv, instruction: str, screen: list[ContentPart]) -> list[Message]:
    """The opening messages of a GUI episode: the tools, then the task and the first screen."""
    first, *rest = screen
    assert isinstance(first, TextPart)
    content: list[ContentPart] = [TextPart(text=f"{instruction}\n\n{first.text}"), *rest]
    return [Message(role="system", content=env.tools_prompt()), Message(role="user", content=content)]
