"""The :class:`~agentgym.envs.gui.env.Screen` of an X desktop in a sandbox: input through xdotool and the screen
read back through ``desktop``, the helper of the ``agentgym/desktop`` image, which waits for the screen to
settle after each action and answers with the windows and a PNG of the frame buffer in one command.

The helper, the X server, the window manager and the applications run as the agent's user, as its terminal
does: the applications write the agent's files, and any X client (which every process of the sandbox can be)
can grab the server or kill the window manager's connection whatever its user. So a helper that fails in a
working sandbox is a :class:`DesktopBroken`, which the environment counts as the agent's doing once the agent
has acted."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from agentgym.envs.gui.keys import parse_combo, xdotool_combo
from agentgym.errors import ToolError
from agentgym.sandboxes.base import Sandbox
from agentgym.sandboxes.errors import SandboxError

ACTION_TIMEOUT = 30.0
"""Seconds one action (input, then the wait for a settled screen) may take before the desktop counts as broken."""
SESSION_TIMEOUT = 60.0
"""Seconds the desktop and its applications have to start."""
TYPE_DELAY_MS = 2
"""Milliseconds between typed characters."""
CLICK_DELAY_MS = 60
"""Milliseconds between the clicks of a double click (well inside the double-click time)."""
DRAG_STEPS = 8
"""Pointer moves between the press and the release of a drag."""
DROP_HOVER = "0.15"
"""Seconds the pointer rests over the drop point, twice, before the release: a drag and drop between
windows needs a few round trips before the target accepts the drop."""
SCROLL_STEP = 40
"""Pixels one wheel click counts for."""
SLOW_QUIET = 0.4
"""Seconds the screen must stay still after Enter or Space: a dialog's default button shows itself pressed for
a quarter of a second before it acts."""
BUTTONS = {"left": "1", "middle": "2", "right": "3"}
ACTIVATING_KEYS = frozenset({"enter", "space"})


class DesktopBroken(SandboxError):
    """The desktop's helper ran in a working sandbox and failed, ran out of time or answered nonsense: what it
    needs (the X server, the frame buffer's file under /tmp, the work dir it starts in, a free process slot) is
    gone or closed. The sandbox itself answered: one removed from outside raises :class:`SandboxDied`."""


@dataclass(frozen=True)
class App:
    """An application of an episode: its command, where its window goes (the frame's x, y, width, height), and
    the key combinations (such as ``"ctrl+Home"``) pressed in it once it has started and the screen has
    settled, for an application whose start-up can end in more than one state (see
    :data:`~agentgym.envs.gui.desktop.episode.START_KEYS`)."""

    argv: tuple[str, ...]
    geometry: tuple[int, int, int, int]
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Window:
    """A mapped window as the helper reports it; ``popup``: a menu or list with no window manager frame."""

    title: str
    focused: bool
    popup: bool
    x: int
    y: int
    width: int
    height: int

    @property
    def center(self) -> tuple[int, int]:
        """The middle of the window."""
        return self.x + self.width // 2, self.y + self.height // 2


class DesktopScreen:
    """The X display of one sandbox, started by :meth:`start`. Every action waits until the screen has settled
    and keeps what the helper saw then, which :meth:`elements` and :meth:`screenshot` read."""

    def __init__(self, sandbox: Sandbox, width: int, height: int) -> None:
        self.sandbox, self.width, self.height = sandbox, width, height
        self.windows: list[Window] = []
        """The windows of the last observation, top of the stack first."""
        self._png = b""

    async def start(self, apps: tuple[App, ...]) -> None:
        """Start X, the window manager and ``apps`` in turn (each placed once its window is mapped, then given
        its keys once the screen has settled)."""
        request = {"width": self.width, "height": self.height,
                   "apps": [{"argv": list(app.argv), "geometry": list(app.geometry),
                             "keys": [xdotool_combo(parse_combo(combo)) for combo in app.keys]} for app in apps]}
        await self._helper("session", request, SESSION_TIMEOUT)

    async def click(self, x: int, y: int, *, button: str = "left", count: int = 1) -> None:
        """Click ``count`` times with ``button`` at (x, y)."""
        await self._act([["mousemove", str(x), str(y), "click", "--repeat", str(count), "--delay",
                          str(CLICK_DELAY_MS), BUTTONS[button]]])

    async def type(self, text: str) -> None:
        """Type ``text``; line breaks and tabs are sent as the Return and Tab keys."""
        commands: list[list[str]] = []
        for index, line in enumerate(text.split("\n")):
            if index:
                commands.append(["key", "Return"])
            for part, chunk in enumerate(line.split("\t")):
                if part:
                    commands.append(["key", "Tab"])
                if chunk:
                    commands.append(["type", "--delay", str(TYPE_DELAY_MS), "--", chunk])
        await self._act(commands, slow="\n" in text)

    async def key(self, keys: tuple[str, ...]) -> None:
        """Press a combination of canonical key names."""
        await self._act([["key", "--delay", "0", xdotool_combo(keys)]], slow=keys[-1] in ACTIVATING_KEYS)

    async def drag(self, x1: int, y1: int, x2: int, y2: int) -> None:
        """Press the left button at (x1, y1), move to (x2, y2) in :data:`DRAG_STEPS` steps, rest there, release."""
        commands = [["mousemove", str(x1), str(y1), "mousedown", "1"]]
        for step in range(1, DRAG_STEPS + 1):
            x, y = x1 + (x2 - x1) * step // DRAG_STEPS, y1 + (y2 - y1) * step // DRAG_STEPS
            commands.append(["mousemove", str(x), str(y), "sleep", "0.02"])
        nudge = str(x2 + 1 if x2 + 1 < self.width else x2 - 1)
        commands += [["sleep", DROP_HOVER, "mousemove", nudge, str(y2), "sleep", DROP_HOVER, "mousemove", str(x2),
                      str(y2)], ["mouseup", "1"]]
        await self._act(commands)

    async def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        """Scroll with wheel clicks (buttons 4 to 7) at (x, y), one per :data:`SCROLL_STEP` pixels."""
        commands = [["mousemove", str(x), str(y)]]
        for delta, back, forth in ((dy, "4", "5"), (dx, "6", "7")):
            clicks = round(abs(delta) / SCROLL_STEP)
            if clicks:
                commands.append(["click", "--repeat", str(clicks), "--delay", "10", forth if delta > 0 else back])
        await self._act(commands)

    async def screenshot(self) -> bytes:
        """The screen as a PNG of :attr:`width` x :attr:`height`, as it was when it last settled."""
        if not self._png:
            await self._helper("observe", None, ACTION_TIMEOUT)
        return self._png

    async def elements(self) -> str:
        """The mapped windows, top first: ``- window "title" [focused] (x, y)`` with the window's centre and
        size, and ``- popup "" (x, y)`` for an open menu or list."""
        if not self._png:
            await self._helper("observe", None, ACTION_TIMEOUT)
        lines = []
        for window in self.windows:
            role = "popup" if window.popup else "window"
            state = " [focused]" if window.focused else ""
            x, y = window.center
            lines.append(f'- {role} "{_quote(window.title)}"{state} ({x}, {y}) size {window.width}x{window.height}')
        return "\n".join(lines) if lines else "(no windows are open)"

    def window(self, title: str) -> Window:
        """The first window of the last observation whose title is ``title``."""
        for window in self.windows:
            if window.title == title:
                return window
        raise LookupError(f'no window "{title}" on the screen')

    async def _act(self, commands: list[list[str]], *, slow: bool = False) -> None:
        request: dict[str, Any] = {"commands": commands}
        if slow:
            request["quiet"] = SLOW_QUIET
        await self._helper("act", request, ACTION_TIMEOUT)

    async def _helper(self, command: str, request: dict[str, Any] | None, timeout: float) -> None:
        """Run ``desktop COMMAND`` with ``request`` as JSON on its input and keep the observation it prints. An
        input xdotool refused is a :class:`ToolError` while the desktop still answers, and a
        :class:`DesktopBroken` when it does not (xdotool fails too when X is gone)."""
        self._png = b""
        stdin = None if request is None else json.dumps(request)
        result = await self.sandbox.exec(["desktop", command], timeout=timeout, stdin=stdin)
        if command == "act" and result.exit_code == 2:
            refused = f"the desktop refused that input: {result.stderr.strip()[-300:]}"
            await self._helper("observe", None, ACTION_TIMEOUT)
            raise ToolError(refused)
        if not result.ok:
            why = "timed out" if result.timed_out else f"exit {result.exit_code}"
            raise DesktopBroken(f"the desktop in sandbox {self.sandbox.id} failed ({why}): "
                                f"{result.stderr.strip()[-500:]}")
        try:
            seen = json.loads(result.stdout)
            self.windows = [Window(title=w["title"], focused=w["focused"], popup=w["popup"], x=w["x"], y=w["y"],
                                   width=w["width"], height=w["height"]) for w in seen["windows"]]
            self._png = base64.b64decode(seen["png"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DesktopBroken(f"the desktop in sandbox {self.sandbox.id} sent a garbled observation: "
                                f"{exc!r}") from exc


def _quote(text: str) -> str:
    return text.replace('"', '\\"')
