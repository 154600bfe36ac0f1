"""The rollout scheduler: many episodes in flight, each at its own pace, streamed as they finish.

Every episode is its own task: no barrier between environments at a turn. A task's group of G samples
is G independent episodes (plus ``redundancy`` spares; the first G finishers are kept and the rest
cancelled). A finished trajectory goes to the stream at once. An infrastructure error is streamed as
``status="error"`` and its group refilled while retries last; a trajectory older than the staleness
bound is dropped (and refilled the same way). With ``batch_size`` the bound also limits what may
start. Every started episode is counted exactly once in :class:`RolloutMetrics`. Environment instances
are reused while healthy; a failed one is closed in the background (within the episode time limit), and
a close that fails is counted in ``close_errors``, never raised.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgym.policies import Policy
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.garbage_collection import relaxed_gc
from agentgym.rollout.metrics import RolloutMetrics
from agentgym.rollout.runner import Backend, EnvKwargs, LocalBackend, MixtureRunner
from agentgym.rollout.stream import TrajectoryStream
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory

Outcome = Literal["kept", "error", "dropped", "surplus"]


def group_id(index: int) -> str:
    """The id in the stream of the group of the task with ``index``."""
    return f"g{index}"


@dataclass
class GroupResult:
    """A task's group once it is closed: the kept trajectories and the errored attempts."""

    index: int
    task: Task
    kept: list[Trajectory] = field(default_factory=list)
    errors: list[Trajectory] = field(default_factory=list)

    @property
    def id(self) -> str:
        return group_id(self.index)


@dataclass
class _Group:
    result: GroupResult
    size: int
    attempts: list[asyncio.Task[None]] = field(default_factory=list)
    running: int = 0
    retries: int = 0
    started: int = 0
    launching: bool = True
    """The scheduler may still start episodes of this group, so it must not close yet."""
    complete: bool = False
    closed: bool = False


class RolloutScheduler:
    """Runs ``policy`` on tasks of ``env`` under ``config``, writing finished trajectories to ``stream``.

    ``env`` is one environment id (its instances made with ``env_kwargs``) or a mapping of several ids to
    their keyword arguments: a mixture, each task played by its own environment.

    ``engine`` (default: the policy's) supplies the policy version for staleness and the busy time
    for metrics. ``on_group`` hears of every group when it closes. ``backend`` says where the episodes
    play (default: here, on the scheduler's loop; see :mod:`agentgym.rollout.runner`).
    """

    def __init__(
        self,
        env: str | EnvKwargs,
        policy: Policy,
        config: RolloutConfig | None = None,
        *,
        env_kwargs: dict[str, Any] | None = None,
        engine: Any = None,
        stream: TrajectoryStream | None = None,
        on_group: Callable[[GroupResult], None] | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.envs: EnvKwargs = {env: env_kwargs} if isinstance(env, str) else dict(env)
        self.policy = policy
        self.config = config or RolloutConfig()
        self.engine = engine if engine is not None else getattr(policy, "engine", None)
        self.stream = stream or TrajectoryStream(self.config.stream_size)
        self.metrics = RolloutMetrics()
        self.on_group = on_group
        self.runner = MixtureRunner(backend or LocalBackend(), self.envs, policy,
                                    close_timeout=self.config.timeouts.episode)
        self._groups: dict[int, _Group] = {}
        """Groups not yet closed, by task index."""
        self._running = 0
        self._kept = 0
        self._first_version = 0
        """The version when :meth:`run` began: admission counts versions published since then."""
        self._started = time.perf_counter()
        self._busy_before: float | None = None
        """The engine's busy seconds when :meth:`run` began."""
        self._changed = asyncio.Event()
        self._stopping = False

    @property
    def version(self) -> int:
        """The current policy version (0 without a versioned engine)."""
        return int(getattr(self.engine, "version", 0))

    def stop(self) -> None:
        """Start nothing more and cancel the episodes in flight (counted as cancelled)."""
        self._stopping = True
        for group in list(self._groups.values()):
            for attempt in group.attempts:
                attempt.cancel()
        self._changed.set()

    def release(self, trajectories: int) -> None:
        """Free the budget of ``trajectories`` kept ones that the consumer threw away (dynamic sampling drops
        groups without signal): as many more may start within the staleness bound."""
        self._kept -= trajectories
        self._changed.set()

    def notify(self) -> None:
        """Wake the scheduler now (after a weight update) instead of at its next poll."""
        self._changed.set()

    async def run(self, tasks: Iterable[Task], *, indices: Iterable[int] | None = None) -> RolloutMetrics:
        """Play every task's group to its end (or until :meth:`stop`), then close the stream.

        A group's index (0, 1, 2, ... by default, or the matching entry of ``indices``) names it and
        seeds its episodes' policy randomness, so a subset run with its original indices replays the
        same episodes."""
        self._started = time.perf_counter()
        self._first_version = self.version
        self._busy_before = self._engine_busy()
        with ExitStack() as stack:
            if self.config.relax_gc:
                stack.enter_context(relaxed_gc())
            await self._run(zip(itertools.count() if indices is None else indices, tasks, strict=False))
        self._clock()
        return self.metrics

    async def _run(self, tasks: Iterable[tuple[int, Task]]) -> None:
        try:
            async with asyncio.TaskGroup() as tasks_group:
                for index, task in tasks:
                    group = _Group(GroupResult(index, task), self.config.group_size)
                    self._groups[index] = group
                    slots = group.size + self.config.redundancy
                    width = self.tree_width()
                    if width and await self._wait_for_room():
                        self._launch(group, tasks_group, tree=width)
                        slots -= width
                    for _ in range(slots):
                        if not await self._wait_for_room() or group.complete:
                            break
                        self._launch(group, tasks_group)
                    group.launching = False
                    if group.running == 0:  # every episode it started has ended (or, stopping, it started none)
                        await self._close(group)
                    if self._stopping:
                        break
        finally:
            try:
                await self.runner.close()
            finally:
                self.metrics.close_errors = self.runner.close_errors
                await self.stream.close()

    # -- admission ------------------------------------------------------------------------------

    async def _wait_for_room(self) -> bool:
        """Wait for a free slot within the staleness budget; ``False`` once stopping."""
        while not self._stopping:
            if self._running < self.config.concurrency and self._admissible():
                return True
            self._changed.clear()
            # versions change outside, so poll; asyncio.timeout, unlike wait_for on Python 3.11, never swallows
            # a cancellation that arrives as the event is set (the task group's, when an attempt fails)
            with suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await self._changed.wait()
        return False

    def _admissible(self) -> bool:
        c = self.config
        if c.batch_size is None or c.max_staleness is None:
            return True
        published = self.version - self._first_version
        return self._running + self._kept < (published + c.max_staleness + 1) * c.batch_size

    def tree_width(self) -> int:
        """How many of a group grow as one tree now (``sampling: latr``): LATR's ``round(G * η)`` at the current
        policy version, which counts the trainer's steps; 0 under stochastic sampling."""
        if self.config.sampling != "latr":
            return 0
        return self.config.latr.width(self.config.group_size, self.version)

    def _launch(self, group: _Group, tasks_group: asyncio.TaskGroup, *, tree: int = 0) -> None:
        """Start a slot of ``group``: one episode and its refills, or a tree of ``tree`` episodes (which counts as
        ``tree`` running ones, for the concurrency and the staleness budget)."""
        self._running += max(tree, 1)
        group.running += 1
        attempt = self._attempt_tree(group, tree, tasks_group) if tree else self._attempt(group)
        group.attempts.append(tasks_group.create_task(attempt))

    # -- one slot's life ------------------------------------------------------------------------

    async def _attempt(self, group: _Group) -> None:
        """Run episodes of ``group`` in one slot: the first, then refills while they are allowed."""
        playing = False
        try:
            while not group.complete:
                playing = True
                trajectory = await self._play(group)
                playing = False  # from here on _settle counts it, with no await before it does
                outcome = await self._settle(group, trajectory)
                if outcome not in ("error", "dropped") or not self._may_retry(group):
                    break
                group.retries += 1
                self.metrics.retried += 1
        except asyncio.CancelledError:
            if playing:
                self.metrics.cancelled += 1
        finally:
            self._running -= 1
            group.running -= 1
            self._changed.set()
            if group.running == 0 and not group.launching:
                await self._close(group)

    async def _attempt_tree(self, group: _Group, width: int, tasks_group: asyncio.TaskGroup) -> None:
        """Grow a tree of ``width`` episodes of ``group``, settle each, and start a fresh stochastic episode for each
        the tree fell short of (pruned, never branched, or failed)."""
        try:
            seed = (self.config.seed, group.result.index, 0)  # the group's single episodes count from 1
            trajectories = await self.runner.play_tree(group.result.task, seed=seed, width=width,
                                                       settings=self.config.latr, timeouts=self.config.timeouts)
            self.metrics.started += len(trajectories)
            self.metrics.count_tree(trajectories)
            kept = [await self._settle(group, trajectory) for trajectory in trajectories].count("kept")
            for _ in range(width - kept):
                if not group.complete and not self._stopping:
                    self.metrics.tree_refilled += 1
                    self._launch(group, tasks_group)
        finally:
            self._running -= width
            group.running -= 1
            self._changed.set()
            if group.running == 0 and not group.launching:
                await self._close(group)

    async def _play(self, group: _Group) -> Trajectory:
        self.metrics.started += 1
        group.started += 1
        seed = (self.config.seed, group.result.index, group.started)
        return await self.runner.play(group.result.task, seed=seed, timeouts=self.config.timeouts)

    async def _settle(self, group: _Group, trajectory: Trajectory) -> Outcome:
        """Count a finished episode and decide its fate."""
        trajectory.info["group"] = {"id": group.result.id, "index": group.result.index, "size": group.size}
        self._clock()
        if trajectory.status == "error":
            self.metrics.count_error(trajectory)
            group.result.errors.append(trajectory)
            await asyncio.shield(self.stream.put(trajectory))
            return "error"
        if group.complete:
            self.metrics.cancelled += 1
            return "surplus"
        lag = self._lag(trajectory)
        if self.config.max_staleness is not None and lag > self.config.max_staleness:
            self.metrics.dropped += 1
            return "dropped"
        self.metrics.finished += 1
        self.metrics.count_finished(trajectory, lag)
        self._kept += 1
        group.result.kept.append(trajectory)
        if len(group.result.kept) == group.size:
            group.complete = True
            current = asyncio.current_task()
            for attempt in group.attempts:
                if attempt is not current:
                    attempt.cancel()
        await asyncio.shield(self.stream.put(trajectory))
        return "kept"

    def _may_retry(self, group: _Group) -> bool:
        others = group.running - 1
        return (
            not self._stopping
            and group.retries < self.config.max_retries
            and len(group.result.kept) + others < group.size
        )

    def _lag(self, trajectory: Trajectory) -> int:
        sampled = [v for v in trajectory.versions if v >= 0]
        return self.version - min(sampled) if sampled else 0

    async def _close(self, group: _Group) -> None:
        if group.closed:
            return
        group.closed = True
        del self._groups[group.result.index]
        complete = len(group.result.kept) >= group.size
        if complete:
            self.metrics.groups_complete += 1
        else:
            self.metrics.groups_failed += 1
            self._kept -= len(group.result.kept)  # discarded: they never reach a batch, so hold no budget
            self._changed.set()
        await self.stream.end_group(group.result.id, complete=complete)
        if self.on_group is not None:
            self.on_group(group.result)

    def _clock(self) -> None:
        """Bring the metrics' wall time, and the engine's busy fraction over it, up to now: a reader during
        the run (the trainer, each step) gets the throughput so far rather than zero."""
        self.metrics.wall_seconds = time.perf_counter() - self._started
        busy = self._engine_busy()
        if self._busy_before is not None and busy is not None and self.metrics.wall_seconds > 0:
            self.metrics.engine_busy = (busy - self._busy_before) / self.metrics.wall_seconds

    def _engine_busy(self) -> float | None:
        stats = getattr(self.engine, "stats", None)
        return stats().busy_seconds if callable(stats) else None
