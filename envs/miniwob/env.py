"""MiniWoB++'s tasks in agentgym's Chromium, in either action space: ``make("miniwob/click-test-v0")``.

``actions="elements"`` (the default) is the web tier: the agent reads the page's accessibility tree and acts on
element ids (:class:`~agentgym.envs.web.env.WebEnv`'s tools). ``actions="pixels"`` is the GUI tier: a
screenshot of MiniWoB's 160x210 task area (375x667 for the flight tasks) with the element list, and the mouse
and keyboard at pixel coordinates (:class:`~agentgym.envs.gui.env.GuiEnv`'s tools). Either way the instruction
is MiniWoB's utterance, the page's own timer enforces MiniWoB's time limit, and an episode ends when the page
says it is done, paid the reward the page computed (the harness's ``env_reward``), a success when its raw
reward is positive. Ending it before (``send_msg_to_user``, ``done``) scores 0. The tasks have no oracle here.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from agentgym.core import Env
from agentgym.envs.gui.env import gui_opening
from agentgym.envs.gui.page_env import PageEnv
from agentgym.envs.miniwob.page import SITE, Outcome, outcome, start_episode, task_page
from agentgym.envs.web.env import WebEnv, opening
from agentgym.messages import ContentPart, Message

Actions = Literal["elements", "pixels"]


class MiniwobEnv(Env):
    """One MiniWoB++ task; ``MiniwobEnv(task=..., actions=...)`` builds the tier ``actions`` names.

    ``mode`` is MiniWoB's data mode (``train`` or ``test``: some tasks draw their words from either list)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 1}
    execution = "inline"
    default_max_turns = 20
    forkable = "no"
    unforkable_reason = (
        "MiniWoB's pages keep time: the episode's clock (its time limit, and the reward that some tasks scale by the "
        "time taken) runs in wall time inside the page, hidden from the observation, and some tasks move things on "
        "timers, so a replayed child would start with the time its replay took, not the parent's, with nothing to "
        "show that it differs")

    def __new__(cls, *args: Any, actions: Actions = "elements", **kwargs: Any) -> Self:
        tier = cls
        if cls is MiniwobEnv:
            tiers: dict[str, type[MiniwobEnv]] = {"elements": MiniwobElementsEnv, "pixels": MiniwobPixelsEnv}
            if actions not in tiers:
                raise ValueError(f"actions must be 'elements' or 'pixels', got {actions!r}")
            tier = tiers[actions]
        return super().__new__(tier)

    def _task(self, task: str, mode: str) -> None:
        """Name this environment's task (what both tiers' ``__init__`` do first)."""
        self.task = task
        self.page = task_page(task)
        self.mode = mode
        self.utterance = ""
        self.time_limit = 0.0
        """MiniWoB's time limit of the episode, in seconds."""
        self.outcome: Outcome | None = None
        self._live = False

    async def begin(self, page: Any) -> str:
        """Start the episode on the loaded task page; the instruction shown to the agent."""
        self.outcome, self._live = None, False
        self.utterance, self.time_limit = await start_episode(page, int(self.np_random.integers(2**31)), self.mode)
        self._live = True
        return f"{self.utterance}\n(MiniWoB's time limit: {self.time_limit:g} seconds.)"

    async def watch(self, page: Any) -> None:
        """End the episode with MiniWoB's reward once the page says it is done."""
        if self._live and self.outcome is None and (ended := await outcome(page)) is not None:
            self.outcome = ended
            self.finish(success=ended.success, reward=ended.reward)

    def ended_early(self) -> tuple[float, bool]:
        """The score of an episode the agent ends itself: MiniWoB's if the page had ended it, else 0."""
        return (self.outcome.reward, self.outcome.success) if self.outcome is not None else (0.0, False)

    def render_text(self) -> str:
        return self.utterance


class MiniwobElementsEnv(MiniwobEnv, WebEnv):
    """The web tier: the accessibility tree in, element actions out."""

    def __init__(self, *, task: str, actions: Actions = "elements", mode: str = "train", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._task(task, mode)
        self.start_path = self.page.path

    @property
    def site(self) -> Any:
        return SITE

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        await self.open_site()
        instruction = await self.begin(self._page)
        return opening(instruction, await self.observe())

    async def observe(self) -> list[ContentPart]:
        parts = await super().observe()
        await self.watch(self._page)
        return parts

    def score(self) -> tuple[float, bool]:
        return self.ended_early()


class MiniwobPixelsEnv(MiniwobEnv, PageEnv):
    """The GUI tier: the screenshot (and element list) in, mouse and keyboard at pixels out."""

    def __init__(self, *, task: str, actions: Actions = "pixels", mode: str = "train", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._task(task, mode)

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        base = self.serve_site(SITE.name, SITE.app())
        screen = await self.open_screen(self.page.width, self.page.height, site=base)
        await screen.goto(base + self.page.path)
        instruction = await self.begin(screen.page)
        return gui_opening(self, instruction, await self.observe())

    async def observe(self) -> list[ContentPart]:
        parts = await super().observe()
        await self.watch(self.screen.page)
        return parts

    async def score(self) -> tuple[float, bool]:
        return self.ended_early()
