"""Env workers: Ray actors that each play many episodes at once on their own event loop, with their own env
pools and the sandbox pools and browser their environments share. The scheduler stays where the rollout runs
and counts everything; :class:`RayRunner` only sends it an episode to the least loaded worker and brings the
trajectory back. An episode whose worker died is an ``error`` trajectory (``worker:died``), which the scheduler
refills like any infrastructure error, while Ray restarts the worker.

One group of workers serves every rollout of a backend that needs the same placement (the trainer's rollout
and its held-out evaluations share them); each rollout has its own env pool in every worker."""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from typing import Any

import ray
from ray.exceptions import RayActorError

from agentgym.cluster.members import Members, answer
from agentgym.episode import Timeouts
from agentgym.registration import EnvSpec
from agentgym.rollout.config import TreeRollout
from agentgym.rollout.runner import LocalRunner
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory

UNREACHABLE_SLACK = 60.0
"""Seconds past the episode time limit after which a worker that has not answered counts as lost."""


class Rollout:
    """What an env worker needs to play a rollout's episodes: its key, the environment and its arguments, the
    policy (an object reference, in a list so that Ray passes it on unresolved) and the instances' close time."""

    def __init__(self, spec: EnvSpec, env_kwargs: dict[str, Any] | None, policy: ray.ObjectRef[Any],
                 close_timeout: float | None) -> None:
        self.key = uuid.uuid4().hex
        self.spec, self.env_kwargs, self.policy, self.close_timeout = spec, env_kwargs, [policy], close_timeout


class EnvWorker:
    """One env-worker process (a Ray actor): plays the episodes of any number of rollouts, many at once, each
    rollout with an env pool of its own (made on its first episode here, also after a restart)."""

    def __init__(self) -> None:
        self._runners: dict[str, LocalRunner] = {}
        self._where = {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    async def play(self, rollout: Rollout, task: Task, seed: tuple[int, ...], timeouts: Timeouts) -> Trajectory:
        """One episode of ``rollout``; its trajectory says where it ran (``info["worker"]``: node and process)."""
        runner = await self._runner(rollout)
        trajectory = await runner.play(task, seed=seed, timeouts=timeouts)
        trajectory.info["worker"] = dict(self._where)
        return trajectory

    async def play_tree(self, rollout: Rollout, task: Task, seed: tuple[int, ...], timeouts: Timeouts, width: int,
                        settings: TreeRollout) -> list[Trajectory]:
        """A tree of episodes of ``rollout`` (:mod:`agentgym.rollout.tree_group`), all played here."""
        runner = await self._runner(rollout)
        trajectories = await runner.play_tree(task, seed=seed, width=width, settings=settings, timeouts=timeouts)
        for trajectory in trajectories:
            trajectory.info["worker"] = dict(self._where)
        return trajectories

    async def _runner(self, rollout: Rollout) -> LocalRunner:
        """The runner of ``rollout`` here, made on its first episode."""
        runner = self._runners.get(rollout.key)
        if runner is None:
            policy = await rollout.policy[0]
            runner = self._runners.setdefault(rollout.key, LocalRunner(
                rollout.spec, policy, rollout.env_kwargs, close_timeout=rollout.close_timeout))
        return runner

    async def close(self, key: str) -> int:
        """Close the instances of rollout ``key``; the number whose close failed."""
        runner = self._runners.pop(key, None)
        if runner is None:
            return 0
        await runner.close()
        return runner.close_errors

    def where(self) -> dict[str, Any]:
        """The node id and process id of this worker."""
        return dict(self._where)


@functools.cache
def _actor_class() -> Any:
    return ray.remote(EnvWorker)


def start_workers(count: int, options: dict[str, Any]) -> Members[Any]:
    """``count`` env workers with Ray actor ``options`` (resources, placement), restarted whenever they die."""
    actor = _actor_class().options(**options, max_restarts=-1, max_task_retries=0)
    return Members([actor.remote() for _ in range(count)], lambda worker: worker.where.remote(), "env worker")


class RayRunner:
    """Plays each episode of one rollout in the least loaded of ``workers``."""

    def __init__(self, workers: Members[Any], spec: EnvSpec, policy: Any, env_kwargs: dict[str, Any] | None, *,
                 close_timeout: float | None) -> None:
        self.workers = workers
        self.rollout = Rollout(spec, env_kwargs, ray.put(policy), close_timeout)
        self.close_errors = 0
        self._closed = False

    async def play(self, task: Task, *, seed: tuple[int, ...], timeouts: Timeouts) -> Trajectory:
        trajectories = await self._in_worker("play", task, seed, timeouts)
        return trajectories[0]

    async def play_tree(self, task: Task, *, seed: tuple[int, ...], width: int, settings: TreeRollout,
                        timeouts: Timeouts) -> list[Trajectory]:
        return await self._in_worker("play_tree", task, seed, timeouts, width, settings)

    async def _in_worker(self, method: str, task: Task, seed: tuple[int, ...], timeouts: Timeouts,
                         *tree: Any) -> list[Trajectory]:
        """Call the least loaded worker's ``method`` (``play``, or ``play_tree`` with ``tree``'s width and
        settings); its trajectories, or one ``error`` trajectory where the worker died or went silent."""
        index = self.workers.pick()
        limit = None if timeouts.episode is None else timeouts.episode + UNREACHABLE_SLACK
        with self.workers.holding(index) as worker:
            call = getattr(worker, method).remote(self.rollout, task, seed, timeouts, *tree)
            try:
                async with asyncio.timeout(limit):
                    answered = await answer(call)
                    return answered if isinstance(answered, list) else [answered]
            except TimeoutError:
                ray.cancel(call)
                return [lost(task, seed, "worker:unreachable", f"env worker {index} did not answer within {limit:g} s")]
            except RayActorError as exc:
                self.workers.died(index, exc)
                return [lost(task, seed, "worker:died", f"env worker {index} died during the episode: {exc}")]

    async def close(self) -> None:
        """Close this rollout's instances in every worker (within ``close_timeout``); a worker that does not
        answer counts as a failed close."""
        if self._closed:
            return
        self._closed = True
        closes = [answer(worker.close.remote(self.rollout.key)) for worker in self.workers.actors]
        try:
            async with asyncio.timeout(self.rollout.close_timeout):
                results = await asyncio.gather(*closes, return_exceptions=True)
        except TimeoutError:
            results = []
        self.close_errors = sum(r if isinstance(r, int) else 1 for r in results)
        self.close_errors += len(self.workers.actors) - len(results)


def lost(task: Task, seed: tuple[int, ...], cause: str, message: str) -> Trajectory:
    """The ``error`` trajectory of an episode lost with the process that played it."""
    return Trajectory(env_id=task.env_id, task=task, status="error", error=message,
                      info={"seed": [*seed, task.seed], "error_cause": cause})
