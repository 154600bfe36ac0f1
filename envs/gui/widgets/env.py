"""``WidgetEnv``: one widget task per environment, each episode a fresh page in the shared Chromium."""

from __future__ import annotations

from typing import Any

from agentgym.core import StepResult
from agentgym.envs.gui.env import gui_opening
from agentgym.envs.gui.page_env import PageEnv
from agentgym.envs.gui.widgets.oracle import Elements
from agentgym.envs.gui.widgets.page import HEIGHT, WIDTH, render
from agentgym.envs.gui.widgets.task import STATE_SCRIPT, Episode, PageState
from agentgym.envs.gui.widgets.tasks import TASKS
from agentgym.messages import Message


class WidgetEnv(PageEnv):
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
        self._moves = 0
        """Steps of this episode whose actions all ran (the oracle's place in its plan; mistakes change
        nothing)."""

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.episode = self.task.generate(self.np_random, difficulty)
        self._moves = 0
        screen = await self.open_screen(WIDTH, HEIGHT)
        await screen.show(render(self.task, self.episode))
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
