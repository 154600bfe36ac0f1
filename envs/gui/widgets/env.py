"""``WidgetEnv``: one widget task per environment, each episode a fresh page in the shared Chromium."""

from __future__ import annotations

from typing import Any

from agentgym.core import StepResult
from agentgym.envs.gui.browser_screen import BrowserScreen
from agentgym.envs.gui.env import GuiEnv, gui_opening
from agentgym.envs.gui.widgets.oracle import Elements
from agentgym.envs.gui.widgets.page import HEIGHT, WIDTH, render
from agentgym.envs.gui.widgets.task import STATE_SCRIPT, Episode, PageState
from agentgym.envs.gui.widgets.tasks import TASKS
from agentgym.envs.web.browser import Browser, release_browser, retain_browser
from agentgym.messages import Message


class WidgetEnv(GuiEnv):
    """A MiniWoB-style task on a 480x360 page: the instruction is in the opening message and on the page; the
    agent acts with the mouse and keyboard at pixel coordinates and calls ``done``; the reward is the task's
    validator reading the widgets' state (partial credit where the task has several parts, success at 1).

    ``task`` names the task (see :data:`~agentgym.envs.gui.widgets.tasks.TASKS`); every task has ``easy``,
    ``medium`` and ``hard`` episodes.
    """

    difficulties = ("easy", "medium", "hard")

    def __init__(self, *, task: str, **kwargs: Any) -> None:
        if task not in TASKS:
            raise ValueError(f"unknown widget task {task!r}; choose one of: {', '.join(TASKS)}")
        super().__init__(**kwargs)
        self.task = TASKS[task]
        self.episode: Episode | None = None
        self._browser: Browser | None = None
        self._screen: BrowserScreen | None = None
        self._moves = 0
        """Steps of this episode whose actions all ran (the oracle's place in its plan; mistakes change
        nothing)."""

    @property
    def screen(self) -> BrowserScreen:
        if self._screen is None:
            raise RuntimeError("no episode is running: call reset() first")
        return self._screen

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        if options:
            raise ValueError(
                f"{self.task.name} takes no reset options besides difficulty, got {sorted(options)}"
            )
        self.episode = self.task.generate(self.np_random, difficulty)
        self._moves = 0
        await self._end_episode()
        if self._browser is None:
            self._browser = retain_browser()
        self._screen = await BrowserScreen.open(self._browser, WIDTH, HEIGHT)
        await self._screen.show(render(self.task, self.episode))
        return gui_opening(self, self.episode.instruction, await self.observe())

    async def astep(self, action: str) -> StepResult:
        result = await super().astep(action)
        if result[4]["action_error"] is None:
            self._moves += 1
        return result

    async def score(self) -> tuple[float, bool]:
        assert self.episode is not None
        state = PageState.of(await self.screen.evaluate(STATE_SCRIPT))
        reward = self.task.score(self.episode, state)
        return reward, reward == 1.0

    def oracle_action(self) -> str:
        assert self.episode is not None
        action = self.task.oracle(self.episode, Elements(self.elements), self._moves)
        return self.format_call(action.tool, **action.arguments)

    def render_text(self) -> str:
        return self.episode.instruction if self.episode is not None else ""

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
