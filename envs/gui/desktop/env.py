"""``gui/Desktop<Name>-v0``: a task on an X desktop in a docker sandbox, seen as screenshots and done with the
mouse and keyboard at pixel coordinates; scored on the files in the sandbox when the agent calls ``done``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from agentgym.envs.gui.desktop.episode import START_KEYS, Episode, lay_down, read_state
from agentgym.envs.gui.desktop.screen import App, DesktopBroken, DesktopScreen
from agentgym.envs.gui.desktop.tasks import TASKS
from agentgym.envs.gui.env import GuiEnv, gui_opening
from agentgym.envs.sandbox_io import ReadBackError
from agentgym.envs.sandboxed import SandboxEnv
from agentgym.errors import ToolError
from agentgym.messages import Message
from agentgym.sandboxes.base import SandboxSpec
from agentgym.sandboxes.errors import SandboxUnavailable

MIN_SIZE = (1024, 768)
"""The smallest screen: the oracle clicks where the applications draw at this size and up."""


class DesktopEnv(GuiEnv, SandboxEnv):
    """One desktop task (``task``, a name of :data:`~agentgym.envs.gui.desktop.tasks.TASKS`) per episode: a fresh
    sandbox from the ``agentgym/desktop`` image, the task's files laid down in /work, its application started
    full screen. ``done`` reads the files back, and the window titles on screen: the reward is the mean score
    of the task's parts less a quarter for each file the task did not name that was changed, moved or deleted;
    success is every part done and nothing else touched. Docker only: the desktop's processes must outlive the
    commands that start them, which the ``local`` backend does not allow.

    The same seed and actions give the same observations, text and pixels: the task's files are dated
    :data:`~agentgym.envs.sandbox_io.FILE_TIME`, no application shows a clock, a blinking caret or an
    animation, the helper reads the screen once it has stopped changing, and an application whose start-up
    can end in more than one state is brought to one (:data:`~agentgym.envs.gui.desktop.episode.START_KEYS`).
    What no seed sets: the sandbox's clock and host name, which an agent can bring on screen (a file it saved
    shows its time of day in the editor's file dialog; ``date`` or ``hostname`` in the terminal), and a screen
    that has not settled within the helper's limit (4 s: an animation, or a machine so loaded that the
    applications never look idle), which is read as it is then.

    What the agent does to its desktop is its own outcome: the terminal, and the file manager that runs
    programs, give it the powers of the user that the desktop runs as. A desktop that stops working under one
    of its actions (X, the window manager or the helper killed, their files under /tmp removed, the work dir
    closed to that user, the process limit used up), or files that cannot be read back at ``done``, end the
    episode as its failure: the call answers with the error, reward 0, ``terminated``. Files it made
    unreadable or odd (a folder closed to it, a fifo, a symbolic link, a binary or huge file) read as missing
    or without text and are scored as such, and a work dir too big to read back
    (:data:`~agentgym.envs.gui.desktop.episode.ENTRY_LIMIT`) scores 0. A sandbox removed from outside or a
    dead engine stays an infrastructure ``error``, as does any failure while the episode is set up."""

    difficulties = ("easy", "medium", "hard")
    default_max_turns = 30
    sandbox_spec: ClassVar[SandboxSpec] = SandboxSpec(image="agentgym/desktop", memory_mb=1024, pids=512)

    def __init__(self, *, task: str, width: int = 1024, height: int = 768, backend: str = "docker",
                 **kwargs: Any) -> None:
        """``width`` x ``height``: the screen's size in pixels (at least 1024 x 768)."""
        if task not in TASKS:
            raise ValueError(f"unknown desktop task {task!r}; choose one of: {', '.join(TASKS)}")
        if width < MIN_SIZE[0] or height < MIN_SIZE[1]:
            raise ValueError(f"the desktop needs at least {MIN_SIZE[0]}x{MIN_SIZE[1]} pixels, got {width}x{height}")
        super().__init__(backend=backend, **kwargs)
        if self.backend != "docker":
            raise SandboxUnavailable(f"the desktop runs only in docker sandboxes (its X server and applications "
                                     f"must outlive the command that starts them), not on the {self.backend} "
                                     "backend: install Docker and run `agentgym sandbox build desktop`")
        self.task = TASKS[task]
        self.width, self.height = width, height
        self.episode: Episode | None = None
        self.result: tuple[list[float], list[str]] | None = None
        """Each part's score and the damaged files, once the episode is scored."""
        self._screen: DesktopScreen | None = None

    @property
    def screen(self) -> DesktopScreen:
        if self._screen is None:
            raise RuntimeError("no desktop: the episode has not started")
        return self._screen

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.episode = self.task.generate(self.np_random, difficulty)
        self.result = None
        sandbox = await self.start_sandbox()
        await lay_down(sandbox, self.episode)
        self._screen = DesktopScreen(sandbox, self.width, self.height)
        await self._screen.start(tuple(App(argv, (0, 0, self.width, self.height), START_KEYS.get(argv[0], ()))
                                       for argv in self.episode.apps))
        return gui_opening(self, self.episode.instruction, await self.observe())

    async def score(self) -> tuple[float, bool]:
        assert self.episode is not None
        titles = tuple(window.title for window in self.screen.windows)
        reward, success, parts, damaged = self.episode.score(await read_state(self.sandbox, titles))
        self.result = (parts, damaged)
        return reward, success

    async def _run_tool(self, name: str, fn: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        """Run a tool; a desktop or work dir that what the agent ran broke ends the episode as its failure."""
        try:
            return await super()._run_tool(name, fn, arguments)
        except (DesktopBroken, ReadBackError) as exc:
            self.finish(success=False, reward=0.0)
            raise ToolError(f"{exc}\nThe desktop no longer works after what ran on it; the episode ends as a "
                            "failure.") from exc

    def oracle_action(self) -> str:
        assert self.episode is not None
        name, arguments = self.episode.plan[min(self.turn, len(self.episode.plan) - 1)]
        return self.format_call(name, **arguments)

    def render_text(self) -> str:
        return self.episode.instruction if self.episode is not None else ""
