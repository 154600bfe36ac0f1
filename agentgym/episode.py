"""One episode of a text policy in an environment, recorded as a :class:`Trajectory`."""

from __future__ import annotations

import asyncio
import time

import numpy as np

from agentgym.core import Env
from agentgym.messages import Message
from agentgym.policies import Policy
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory, Turn


async def run_episode(
    env: Env, policy: Policy, task: Task, *, seed: int = 0, timeout: float | None = None
) -> Trajectory:
    """Play ``task`` to the end. A failure of the environment or the policy (an exception, or the
    ``timeout`` in seconds running out) gives ``status="error"`` with its cause, never a score."""
    rng = np.random.default_rng([seed, task.seed])
    trajectory = Trajectory(env_id=task.env_id, task=task)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            await _play(env, policy, task, rng, trajectory)
    except TimeoutError:
        trajectory.status, trajectory.error = "error", f"episode timed out after {timeout} s"
    except Exception as exc:  # infrastructure failure: recorded, never scored
        trajectory.status, trajectory.error = "error", f"{type(exc).__name__}: {exc}"
    trajectory.timings["total_seconds"] = time.perf_counter() - started
    return trajectory


async def _play(env: Env, policy: Policy, task: Task, rng: np.random.Generator, trajectory: Trajectory) -> None:
    observation, _ = await env.areset(**task.reset_kwargs())
    trajectory.messages.extend(observation)
    while True:
        tick = time.perf_counter()
        action = await policy.act(env, trajectory.messages, rng)
        tock = time.perf_counter()
        trajectory.messages.append(Message(role="assistant", content=action))
        observation, reward, terminated, truncated, info = await env.astep(action)
        trajectory.messages.extend(observation)
        trajectory.turns.append(
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
        trajectory.reward += reward
        if terminated or truncated:
            trajectory.success = bool(info["success"])
            trajectory.status = "truncated" if truncated else "ok"
            return
