"""MiniWoB++'s pages as the original harness drives them: served from the ``miniwob`` package's own HTML, an
episode started with the harness's calls (``Math.seedrandom``, ``core.setDataMode``, ``core.startEpisodeReal``),
and the reward and done signals read from the page's globals (``WOB_DONE_GLOBAL``, ``WOB_REWARD_GLOBAL``,
``WOB_RAW_REWARD_GLOBAL``, ``WOB_REWARD_REASON``), never recomputed here."""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

INSTALL = "pip install 'agentgym[miniwob]'"
READY_POLLS = 100
"""Polls of ``WOB_TASK_READY`` (every 50 ms) before a task that never gets ready is a broken page."""
START_SCRIPT = """([seed, mode]) => {
  Math.seedrandom(seed);
  core.setDataMode(mode);
  core.startEpisodeReal();
  core.cover_div.onclick = null;
  if (document.getElementById("reward-display")) core.hideDisplay();
}"""
"""The harness's start. The sync screen MiniWoB shows over a finished task would start the next episode on a
click; the harness never clicks it, and here an action sent after the page ended the episode (its timer ran
out while the agent thought) must not either, so the screen stays inert. MiniWoB's scoreboard beside the task
(last reward, time left, episodes done) is hidden, as the harness leaves it out of the DOM it reads: its clock
made one seed show two pages, a second apart."""
OPENING_SCRIPT = "() => [WOB_TASK_READY, core.getUtterance(), core.EPISODE_MAX_TIME]"
OUTCOME_SCRIPT = ("() => typeof WOB_DONE_GLOBAL === 'undefined' ? null"
                  " : [WOB_DONE_GLOBAL, WOB_REWARD_GLOBAL, WOB_RAW_REWARD_GLOBAL, WOB_REWARD_REASON]")
"""The page's done and reward globals; ``null`` on a page that is not a task's (the agent navigated away)."""
LEFT_THE_TASK = "left the task's page"


@dataclass(frozen=True)
class TaskPage:
    """Where a task's page lies under the HTML folder, and its size (the flight tasks are a phone screen)."""

    path: str
    width: int
    height: int


@dataclass(frozen=True)
class Outcome:
    """How MiniWoB ended an episode: its reward (scaled by the time taken where the task says so), the raw
    reward (1 solved, below 0 failed) and its reason (``"timed out"``)."""

    reward: float
    raw_reward: float
    reason: str

    @property
    def success(self) -> bool:
        return self.raw_reward > 0


def html_dir() -> Path:
    """The ``miniwob`` package's HTML folder; a clear error when the package is missing."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or spec.origin is None:
        raise ImportError(f"MiniWoB++ tasks need the miniwob package: {INSTALL}")
    return Path(spec.origin).parent / "html"


@cache
def tasks() -> dict[str, bool]:
    """Every task the ``miniwob`` package registers (with Gymnasium, on import), and whether it says the
    task's episodes can differ for one seed."""
    import gymnasium
    import miniwob  # noqa: F401 - registers its tasks as miniwob/<task>-v1

    return {spec.id.removeprefix("miniwob/").rsplit("-v", 1)[0]: spec.nondeterministic
            for spec in gymnasium.registry.values() if spec.id.startswith("miniwob/")}


def task_page(task: str) -> TaskPage:
    """The page of ``task`` (``click-test``, ``flight.Alaska``) and its screen size, as the harness has them."""
    if task not in tasks():
        raise ValueError(f"unknown MiniWoB task {task!r}; the miniwob package has {len(tasks())} tasks")
    if task.startswith("flight."):
        return TaskPage(f"/flight/{task.removeprefix('flight.')}/wrapper.html", 375, 667)
    return TaskPage(f"/miniwob/{task}.html", 160, 210)


class MiniwobSite:
    """The ``miniwob`` package's HTML as a static site (the web tier's :class:`~agentgym.envs.web.env.Site`):
    MiniWoB's pages keep their state in the page, so a session holds nothing."""

    name = "miniwob"
    session_cookie = "miniwob-session"

    def app(self) -> Any:
        return _static_app()

    def new_session(self, state: Any = None) -> str:
        return uuid.uuid4().hex

    def end_session(self, session: str) -> None:
        return None


SITE = MiniwobSite()


@cache
def _static_app() -> Any:
    """The HTML folder served as files, made once per process."""
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    return Starlette(routes=[Mount("/", StaticFiles(directory=html_dir()))])


async def start_episode(page: Any, seed: int, mode: str) -> tuple[str, float]:
    """Start an episode on a loaded task page as the harness does; its utterance and time limit in seconds."""
    await page.evaluate(START_SCRIPT, [seed, mode])
    for _ in range(READY_POLLS):
        ready, utterance, limit_ms = await page.evaluate(OPENING_SCRIPT)
        if ready:
            return str(utterance), float(limit_ms) / 1000
        await asyncio.sleep(0.05)
    raise RuntimeError("the MiniWoB task page never set WOB_TASK_READY")


async def outcome(page: Any) -> Outcome | None:
    """How the episode ended, once the page says it is done; ``None`` while it goes on. An agent that has
    navigated off the task's page has failed it (MiniWoB's raw reward -1, paid 0: the page gave no reward)."""
    globals_ = await page.evaluate(OUTCOME_SCRIPT)
    if globals_ is None:
        return Outcome(0.0, -1.0, LEFT_THE_TASK)
    done, reward, raw, reason = globals_
    return Outcome(float(reward), float(raw), str(reason or "")) if done else None
