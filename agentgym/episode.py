"""One episode of a policy in an environment, recorded as a :class:`Trajectory`.

Time limits nest: a tool call within a turn (the policy's answer and the environment's step) within
the episode. Whatever ends an episode abnormally is recorded, never scored: an exception or a time
limit gives ``status="error"`` with its cause (``info["error_cause"]`` names the phase and kind, for
counting); a full context window gives ``status="truncated"``.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentgym.core import Env
from agentgym.errors import ContextLimit, EpisodeTimeout
from agentgym.messages import Message
from agentgym.policies import Policy, PolicySession
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory, Turn


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
        for (inner, a), (outer, b) in zip(limits, limits[1:]):
            if a > b:
                raise ValueError(f"timeouts.{inner} ({a:g} s) must not exceed timeouts.{outer} ({b:g} s)")
        return self


async def run_episode(
    env: Env, policy: Policy, task: Task, *, seed: int | tuple[int, ...] = 0, timeouts: Timeouts | None = None
) -> Trajectory:
    """Play ``task`` to the end and return its trajectory; never raises for a failed episode (only
    cancellation propagates). The policy's randomness is seeded by ``seed`` and the task's seed."""
    timeouts = timeouts or Timeouts()
    trajectory = Trajectory(env_id=task.env_id, task=task)
    env.tool_timeout = timeouts.tool
    seeds = seed if isinstance(seed, tuple) else (seed,)
    session = policy.start(env, np.random.default_rng([*seeds, task.seed]))
    episode = _Episode(env, session, trajectory, timeouts)
    started = time.perf_counter()
    deadline = asyncio.timeout(timeouts.episode)
    try:
        async with deadline:
            await episode.play(task)
    except ContextLimit as exc:
        trajectory.status = "truncated"
        trajectory.info["truncated_by"] = str(exc)
    except TimeoutError as exc:
        if deadline.expired():
            exc = EpisodeTimeout("episode", timeouts.episode or 0.0)
        episode.fail(exc)
    except Exception as exc:  # infrastructure failure: recorded, never scored
        episode.fail(exc)
    finally:
        session.record(trajectory)
        trajectory.timings["total_seconds"] = time.perf_counter() - started
        trajectory.timings["policy_seconds"] = sum(t.policy_seconds for t in trajectory.turns)
        trajectory.timings["env_seconds"] = sum(t.env_seconds for t in trajectory.turns)
    return trajectory


class _Episode:
    """The loop of one episode, remembering which phase it is in for the error report."""

    def __init__(self, env: Env, session: PolicySession, trajectory: Trajectory, timeouts: Timeouts) -> None:
        self.env, self.session, self.trajectory, self.timeouts = env, session, trajectory, timeouts
        self.phase = "reset"

    async def play(self, task: Task) -> None:
        observation, _ = await self.env.areset(**task.reset_kwargs())
        self.trajectory.messages.extend(observation)
        while True:
            deadline = asyncio.timeout(self.timeouts.turn)
            try:
                async with deadline:
                    if await self._turn(observation):
                        return
            except TimeoutError:
                if deadline.expired():
                    raise EpisodeTimeout("turn", self.timeouts.turn or 0.0) from None
                raise
            observation = self.trajectory.turns[-1].observation

    async def _turn(self, observation: list[Message]) -> bool:
        """Play one turn; whether the episode is over."""
        self.phase = "policy"
        tick = time.perf_counter()
        action = await self.session.act(observation)
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
                policy_seconds=tock - tick,
                env_seconds=time.perf_counter() - tock,
            )
        )
        self.trajectory.reward += reward
        if terminated or truncated:
            self.trajectory.success = bool(info["success"])
            self.trajectory.status = "truncated" if truncated else "ok"
            return True
        return False

    def fail(self, exc: BaseException) -> None:
        """Mark the trajectory as an infrastructure failure with its cause."""
        kind = f"timeout:{exc.scope}" if isinstance(exc, EpisodeTimeout) else f"{self.phase}:{type(exc).__name__}"
        self.trajectory.status = "error"
        self.trajectory.error = f"{type(exc).__name__} during {self.phase}: {exc}"
        self.trajectory.info["error_cause"] = kind
