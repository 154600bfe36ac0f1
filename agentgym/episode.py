"""One episode of a policy in an environment, recorded as a :class:`Trajectory`.

Time limits nest: a tool call within a turn (the policy's answer and the environment's step) within
the episode. Whatever ends an episode abnormally is recorded, never scored: an exception or a time
limit gives ``status="error"`` with its cause (``info["error_cause"]`` names the phase and kind, for
counting); a full context window ends it as the policy's context policy says (by default
``status="truncated"``). Between turns an episode waits while its
:data:`turn_gate` is clear (the scheduler pauses a surplus episode there to carry it over); that pause is no
part of any time limit.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import traceback
from contextvars import ContextVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentgym.core import Env
from agentgym.errors import ContextLimit, EpisodeTimeout
from agentgym.messages import Message
from agentgym.policies import Policy, PolicySession
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory, Turn

turn_gate: ContextVar[asyncio.Event | None] = ContextVar("turn_gate", default=None)
"""The gate the episode of the current task waits at before each turn after the first, while it is clear
(``None``: never waits); the seconds waited go to ``timings["paused_seconds"]``."""


class Timeouts(BaseModel):
    """Nested time limits in seconds (``None``: no limit); each must fit inside the one above it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episode: float | None = Field(600.0, gt=0)
    """The whole episode, from reset to the last step."""
    turn: float | None = Field(120.0, gt=0)
    """One turn: the policy's answer plus the environment's step."""
    tool: float | None = Field(60.0, gt=0)
    """One tool call inside a step."""

    @model_validator(mode="after")
    def _nested(self) -> Timeouts:
        limits = [(n, v) for n, v in (("tool", self.tool), ("turn", self.turn), ("episode", self.episode)) if v is not None]
        for (inner, a), (outer, b) in itertools.pairwise(limits):
            if a > b:
                raise ValueError(f"timeouts.{inner} ({a:g} s) must not exceed timeouts.{outer} ({b:g} s)")
        return self


async def run_episode(
    env: Env, policy: Policy, task: Task, *, seed: int | tuple[int, ...] = 0, timeouts: Timeouts | None = None
) -> Trajectory:
    """Play ``task`` to the end and return its trajectory; never raises for a failed episode (only
    cancellation propagates). The policy's randomness is seeded by ``seed`` and the task's seed, which
    ``info["seed"]`` records."""
    timeouts = timeouts or Timeouts()
    trajectory = Trajectory(env_id=task.env_id, task=task)
    env.tool_timeout = timeouts.tool
    seeds = [*(seed if isinstance(seed, tuple) else (seed,)), task.seed]
    trajectory.info["seed"] = seeds
    episode = EpisodeLoop(env, trajectory, timeouts)
    started = time.perf_counter()
    watchdog = _Watchdog(timeouts)
    session: PolicySession | None = None
    try:
        session = policy.start(env, np.random.default_rng(seeds))
        await episode.play(session, task, watchdog)
    except ContextLimit as exc:
        exc.end(trajectory)
    except asyncio.CancelledError:
        if watchdog.fired is None or watchdog.task.uncancel() > 0:
            raise  # cancelled from outside, not by a time limit
        episode.fail(watchdog.fired)
    except Exception as exc:  # noqa: BLE001 - an infrastructure failure: recorded, never scored
        episode.fail(exc)
    finally:
        watchdog.stop()
        if session is not None:
            episode.record(session)
        trajectory.timings["total_seconds"] = time.perf_counter() - started
        trajectory.timings["policy_seconds"] = sum(t.policy_seconds for t in trajectory.turns)
        trajectory.timings["env_seconds"] = sum(t.env_seconds for t in trajectory.turns)
    return trajectory


class _Watchdog:
    """The episode's and the current turn's time limits on one lazily re-armed timer.

    A turn only moves a deadline (a float); the timer fires at the earliest deadline it knew of,
    re-arms itself if the current one is later, and otherwise cancels the episode's task, which
    :func:`run_episode` turns into :class:`EpisodeTimeout`. Short turns thus cost no timer at all.
    """

    def __init__(self, timeouts: Timeouts) -> None:
        self.timeouts = timeouts
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None, "the watchdog is made inside the episode's task"
        self.task = task
        self.fired: EpisodeTimeout | None = None
        self.episode_end = None if timeouts.episode is None else self.loop.time() + timeouts.episode
        self.turn_end: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._arm()

    def start_turn(self) -> None:
        """The next turn begins: its limit counts from now."""
        if self.timeouts.turn is not None:
            self.turn_end = self.loop.time() + self.timeouts.turn
            self._arm()

    async def pause(self, gate: asyncio.Event) -> float:
        """Wait for ``gate`` with the limits stopped; the seconds waited, by which the episode's limit moves later."""
        episode_end, self.episode_end, self.turn_end = self.episode_end, None, None
        tick = self.loop.time()
        try:
            await gate.wait()
        finally:
            waited = self.loop.time() - tick
            self.episode_end = None if episode_end is None else episode_end + waited
            self._arm()
        return waited

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _deadline(self) -> tuple[float, str] | None:
        limits = [(end, scope) for end, scope in ((self.turn_end, "turn"), (self.episode_end, "episode")) if end is not None]
        return min(limits) if limits else None

    def _arm(self) -> None:
        deadline = self._deadline()
        if deadline is None or (self._handle is not None and self._handle.when() <= deadline[0]):
            return  # an earlier wake-up is already set; it re-arms itself when it comes
        self.stop()
        self._handle = self.loop.call_at(deadline[0], self._wake)

    def _wake(self) -> None:
        self._handle = None
        deadline = self._deadline()
        if deadline is None:
            return
        if self.loop.time() < deadline[0]:
            self._handle = self.loop.call_at(deadline[0], self._wake)
            return
        seconds = self.timeouts.turn if deadline[1] == "turn" else self.timeouts.episode
        self.fired = EpisodeTimeout(deadline[1], seconds or 0.0)
        self.task.cancel()


class EpisodeLoop:
    """The loop of one episode, remembering which phase it is in for the error report."""

    def __init__(self, env: Env, trajectory: Trajectory, timeouts: Timeouts) -> None:
        self.env, self.trajectory, self.timeouts = env, trajectory, timeouts
        self.phase = "policy"

    async def play(self, session: PolicySession, task: Task, watchdog: _Watchdog) -> None:
        self.phase = "reset"
        observation, _ = await self.env.areset(**task.reset_kwargs())
        self.trajectory.messages.extend(observation)
        while True:
            watchdog.start_turn()
            if await self._turn(session, observation):
                return
            observation = self.trajectory.turns[-1].observation
            gate = turn_gate.get()
            if gate is not None and not gate.is_set():
                self.phase = "paused"
                paused = await watchdog.pause(gate)
                self.trajectory.timings["paused_seconds"] = self.trajectory.timings.get("paused_seconds", 0.0) + paused

    async def _turn(self, session: PolicySession, observation: list[Message]) -> bool:
        """Play one turn; whether the episode is over."""
        self.phase = "policy"
        tick = time.perf_counter()
        action = await session.act(observation)
        return await self.apply(action, time.perf_counter() - tick)

    async def apply(self, action: str, policy_seconds: float) -> bool:
        """Step the environment with the agent's ``action`` (chosen in ``policy_seconds``) and record the turn;
        whether the episode is over."""
        tock = time.perf_counter()
        self.phase = "env"
        self.trajectory.messages.append(Message(role="assistant", content=action))
        observation, reward, terminated, truncated, info = await self.env.astep(action)
        self.trajectory.messages.extend(observation)
        self.trajectory.turns.append(
            Turn(
                action=action,
                tool_calls=info["tool_calls"],
                observation=observation,
                reward=reward,
                action_error=info["action_error"],
                policy_seconds=policy_seconds,
                env_seconds=time.perf_counter() - tock,
            )
        )
        self.trajectory.reward += reward
        if "report" in info:
            self.trajectory.info["report"] = info["report"]
        if terminated or truncated:
            self.trajectory.success = bool(info["success"])
            self.trajectory.status = "truncated" if truncated else "ok"
            return True
        return False

    def record(self, session: PolicySession) -> None:
        """Let the session write what it alone knows; a session that cannot spoils the trajectory (an
        earlier failure stays the recorded cause)."""
        try:
            session.record(self.trajectory)
        except Exception as exc:  # noqa: BLE001 - recorded as the trajectory's failure
            if self.trajectory.status != "error":
                self.phase = "record"
                self.fail(exc)

    def fail(self, exc: BaseException) -> None:
        """Mark the trajectory as an infrastructure failure with its cause."""
        kind = f"timeout:{exc.scope}" if isinstance(exc, EpisodeTimeout) else f"{self.phase}:{type(exc).__name__}"
        self.trajectory.status = "error"
        self.trajectory.error = f"{type(exc).__name__} during {self.phase}: {exc}"
        if exc.__traceback__ is not None:  # raised, not a time limit the watchdog fired
            self.trajectory.error_traceback = "".join(traceback.format_exception(exc))
        self.trajectory.info["error_cause"] = kind
