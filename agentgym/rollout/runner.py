"""Where a rollout's episodes run: here, on the scheduler's event loop (:class:`LocalRunner`), or in env-worker
processes (:mod:`agentgym.cluster`). The scheduler decides what to play and counts what came back; a runner
only plays one episode when asked, and never raises for a failed one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from agentgym.episode import Timeouts, run_episode
from agentgym.errors import AgentGymError
from agentgym.inference.hosts import EngineHost, LocalEngineHost
from agentgym.policies import Policy
from agentgym.policies.lm import LMPolicy
from agentgym.registration import EnvSpec
from agentgym.rollout.config import TreeRollout
from agentgym.rollout.pool import EnvPool
from agentgym.rollout.tree_group import play_tree_group
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory


class EpisodeRunner(Protocol):
    """Plays episodes of one environment with one policy."""

    @property
    def close_errors(self) -> int:
        """Instances whose close failed (read after :meth:`close`)."""
        ...

    async def play(self, task: Task, *, seed: tuple[int, ...], timeouts: Timeouts) -> Trajectory:
        """Play ``task`` to its end; a failed episode is an ``error`` trajectory, never an exception (only
        cancellation, and a bad environment id or arguments, propagate)."""
        ...

    async def play_tree(self, task: Task, *, seed: tuple[int, ...], width: int, settings: TreeRollout,
                        timeouts: Timeouts) -> list[Trajectory]:
        """Play ``task`` as a tree of at most ``width`` episodes (:mod:`agentgym.rollout.tree_group`); failures as
        in :meth:`play`."""
        ...

    async def close(self) -> None:
        """Close what the runner holds, waiting for it; safe to call twice."""
        ...


class Backend(EngineHost, Protocol):
    """Where rollouts run: ``local`` plays in this process, ``ray`` in env-worker actors with engine replicas."""

    def runner(self, env_id: str, policy: Policy, env_kwargs: dict[str, Any] | None, *,
               close_timeout: float | None) -> EpisodeRunner:
        """A runner of ``env_id`` (built with ``env_kwargs``) for ``policy``; instances close within
        ``close_timeout`` seconds."""
        ...


EnvKwargs = Mapping[str, dict[str, Any] | None]
"""The environments of a rollout: each id with the keyword arguments its instances are made with."""


class MixtureRunner:
    """Plays each task with the runner of the task's environment: one runner (and env pool) per environment,
    so one rollout runs a whole mixture of environments at once."""

    def __init__(self, backend: Backend, envs: EnvKwargs, policy: Policy, *, close_timeout: float | None) -> None:
        if not envs:
            raise ValueError("a rollout needs at least one environment")
        self.runners: dict[str, EpisodeRunner] = {
            env_id: backend.runner(env_id, policy, kwargs, close_timeout=close_timeout) for env_id, kwargs in envs.items()}
        """Each environment's runner, by id."""

    @property
    def close_errors(self) -> int:
        return sum(runner.close_errors for runner in self.runners.values())

    async def play(self, task: Task, *, seed: tuple[int, ...], timeouts: Timeouts) -> Trajectory:
        return await self._runner(task).play(task, seed=seed, timeouts=timeouts)

    async def play_tree(self, task: Task, *, seed: tuple[int, ...], width: int, settings: TreeRollout,
                        timeouts: Timeouts) -> list[Trajectory]:
        return await self._runner(task).play_tree(task, seed=seed, width=width, settings=settings, timeouts=timeouts)

    def _runner(self, task: Task) -> EpisodeRunner:
        """The runner of ``task``'s environment."""
        runner = self.runners.get(task.env_id)
        if runner is None:
            raise ValueError(f"a task of {task.env_id}, which this rollout does not run (it runs "
                             f"{', '.join(self.runners)})")
        return runner

    async def close(self) -> None:
        """Close every environment's runner, each even where another's close raised."""
        errors = []
        for runner in self.runners.values():
            try:
                await runner.close()
            except Exception as exc:  # noqa: BLE001 - collected: the first is raised once every runner closed
                errors.append(exc)
        if errors:
            raise errors[0]


class LocalRunner:
    """Plays episodes on the running event loop with instances from an :class:`EnvPool` (a healthy one is
    reused, a failed one closed)."""

    def __init__(self, env: str | EnvSpec, policy: Policy, env_kwargs: dict[str, Any] | None = None, *,
                 close_timeout: float | None = None) -> None:
        self.policy = policy
        self._pool = EnvPool(env, env_kwargs, close_timeout=close_timeout)

    @property
    def close_errors(self) -> int:
        return self._pool.close_errors

    @property
    def created(self) -> int:
        """Environment instances made so far."""
        return self._pool.created

    async def play(self, task: Task, *, seed: tuple[int, ...], timeouts: Timeouts) -> Trajectory:
        env = self._pool.acquire()
        healthy = False
        try:
            trajectory = await run_episode(env, self.policy, task, seed=seed, timeouts=timeouts)
            healthy = trajectory.status != "error"
            return trajectory
        finally:
            self._pool.release(env, healthy=healthy)

    async def play_tree(self, task: Task, *, seed: tuple[int, ...], width: int, settings: TreeRollout,
                        timeouts: Timeouts) -> list[Trajectory]:
        if not isinstance(self.policy, LMPolicy):
            raise AgentGymError(f"tree rollouts need a token-level model policy (torch or vllm engine), not "
                                f"{type(self.policy).__name__}")
        return await play_tree_group(self._pool, self.policy, task, seed=seed, width=width, settings=settings,
                                     timeouts=timeouts)

    async def close(self) -> None:
        await self._pool.close()


class LocalBackend(LocalEngineHost):
    """Every episode (and engine) in this process, on the rollout's event loop."""

    def runner(self, env_id: str, policy: Policy, env_kwargs: dict[str, Any] | None, *,
               close_timeout: float | None) -> LocalRunner:
        return LocalRunner(env_id, policy, env_kwargs, close_timeout=close_timeout)
