"""The rollout scheduler: many episodes in flight, each at its own pace, streamed as they finish.

Every episode is its own task: no barrier between environments at a turn. A task's group of G samples
is G independent episodes (plus ``redundancy`` spares; the first G finishers are kept and the rest
cancelled). A finished trajectory goes to the stream at once. An infrastructure error is streamed as
``status="error"`` and its group refilled while retries last; a trajectory older than the staleness
bound is dropped (and refilled the same way). With ``batch_size`` the bound also limits what may
start. Every started episode is counted exactly once in :class:`RolloutMetrics`. Environment instances
are reused while healthy; a failed one is closed in the background (within the episode time limit), and
a close that fails is counted in ``close_errors``, never raised.

With ``carry_over`` (APRIL's partial rollout) a complete group's spares still playing are not cancelled but
carried over: they leave the group (which closes now), pause at their next turn boundary (holding their
environment, slot and staleness budget) and, once the policy version has advanced, are adopted before the next
task is handed out by a carry group of their task (``GroupId(index, carry=n)``), filled up with fresh episodes. They resume
regardless of the version when every episode in flight is paused and nothing more can start (at the end of the
tasks, or with the budget spent), so a rollout never stalls on them. With ``carry_over_resume: at_once`` they are
adopted as their group completes and never pause.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgym.episode import turn_gate
from agentgym.policies import Policy
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.garbage_collection import relaxed_gc
from agentgym.rollout.group_id import GroupId
from agentgym.rollout.metrics import RolloutMetrics
from agentgym.rollout.runner import Backend, EnvKwargs, LocalBackend, MixtureRunner
from agentgym.rollout.stream import TrajectoryStream
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory

Outcome = Literal["kept", "error", "dropped", "surplus"]


@dataclass
class GroupResult:
    """A task's group once it is closed: the kept trajectories and the errored attempts."""

    index: int
    task: Task
    kept: list[Trajectory] = field(default_factory=list)
    errors: list[Trajectory] = field(default_factory=list)
    carry: int = 0
    """0 for the task's own group; ``n`` for its ``n``-th carry group (``carry_over``)."""

    @property
    def id(self) -> GroupId:
        return GroupId(self.index, self.carry)


def _open_gate() -> asyncio.Event:
    gate = asyncio.Event()
    gate.set()
    return gate


@dataclass
class _Slot:
    """One attempt: the group it plays for now (a carried-over one moves to a carry group) and the gate its episode
    waits at between turns (clear while carried over)."""

    group: _Group
    gate: asyncio.Event = field(default_factory=_open_gate)
    task: asyncio.Task[None] = field(init=False)
    playing: bool = False
    """Its episode has started and is not yet settled (cancelling it now counts it as cancelled)."""
    carried_at: int | None = None
    """The policy version when it was carried over (``None``: never)."""


@dataclass
class _Group:
    result: GroupResult
    size: int
    started: int = 0
    """Episodes started; the last one's seed (a carry group continues its original's count)."""
    slots: list[_Slot] = field(default_factory=list)
    running: int = 0
    retries: int = 0
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
        self._groups: dict[GroupId, _Group] = {}
        """Groups not yet closed, by id."""
        self._carry: list[_Slot] = []
        """Carried-over attempts paused until a carry group adopts them."""
        self._to_fill: deque[tuple[_Group, int]] = deque()
        """Carry groups waiting for their fresh episodes, with how many."""
        self._carry_groups: Counter[int] = Counter()
        """Carry groups opened so far, by task index."""
        self._exhausted = False
        """No new task is left to hand out."""
        self._running = 0
        self._kept = 0
        self._first_version = 0
        """The version when :meth:`run` began: admission counts versions published since then."""
        self._started = time.perf_counter()
        self._busy_before: float | None = None
        """The engine's busy seconds when :meth:`run` began."""
        self._tokens_before: int | None = None
        """The engine's generated tokens when :meth:`run` began."""
        self._changed = asyncio.Event()
        self._stopping = False

    @property
    def version(self) -> int:
        """The current policy version (0 without a versioned engine)."""
        return int(getattr(self.engine, "version", 0))

    def stop(self) -> None:
        """Start nothing more and cancel the episodes in flight, carried-over ones too (counted as cancelled)."""
        self._stopping = True
        for group in list(self._groups.values()):
            for slot in group.slots:
                slot.task.cancel()
        for slot in self._carry:
            slot.task.cancel()
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
        self._tokens_before = self._engine_tokens()
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
                    await self._resume_carried(tasks_group)
                    if self._stopping:
                        break
                    group = self._open(GroupResult(index, task))
                    await self._fill(group, self.config.group_size + self.config.redundancy, tasks_group,
                                     tree=self.tree_width())
                    if self._stopping:
                        break
                self._exhausted = True
                await self._resume_carried(tasks_group)
                while self.config.carry_over and (self._carry or self._groups) and not self._stopping:
                    await self._wait_for_change()
                    await self._resume_carried(tasks_group)
        finally:
            try:
                await self.runner.close()
            finally:
                self.metrics.close_errors = self.runner.close_errors
                await self.stream.close()

    def _open(self, result: GroupResult, started: int = 0) -> _Group:
        group = _Group(result, self.config.group_size, started)
        self._groups[result.id] = group
        return group

    async def _fill(self, group: _Group, slots: int, tasks_group: asyncio.TaskGroup, *, tree: int = 0) -> None:
        """Start ``slots`` episodes of ``group`` as room allows (the first ``tree`` as one tree), then let it close."""
        if tree and await self._wait_for_room():
            self._launch(group, tasks_group, tree=tree)
            slots -= tree
        for _ in range(slots):
            if not await self._wait_for_room() or group.complete:
                break
            self._launch(group, tasks_group)
        group.launching = False
        if group.running == 0:  # every episode it started has ended (or, stopping, it started none)
            await self._close(group)

    # -- admission ------------------------------------------------------------------------------

    def _has_room(self) -> bool:
        return self._running < self.config.concurrency and self._admissible()

    async def _wait_for_room(self) -> bool:
        """Wait for a free slot within the staleness budget (adopting carried-over episodes due meanwhile);
        ``False`` once stopping."""
        while not self._stopping:
            if self._has_room():
                return True
            self._adopt_due()
            await self._wait_for_change()
        return False

    async def _wait_for_change(self) -> None:
        self._changed.clear()
        # versions change outside, so poll; asyncio.timeout, unlike wait_for on Python 3.11, never swallows
        # a cancellation that arrives as the event is set (the task group's, when an attempt fails)
        with suppress(TimeoutError):
            async with asyncio.timeout(0.05):
                await self._changed.wait()

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
        slot = _Slot(group)
        group.slots.append(slot)
        slot.task = tasks_group.create_task(self._attempt_tree(group, tree, tasks_group) if tree else self._attempt(slot))

    # -- one slot's life ------------------------------------------------------------------------

    async def _attempt(self, slot: _Slot) -> None:
        """Run episodes in one slot: the first, then refills of its group while they are allowed."""
        turn_gate.set(slot.gate)  # this task's own context: its episodes wait at this slot's gate
        try:
            while not slot.group.complete:
                slot.playing = True
                trajectory = await self._play(slot.group)
                await slot.gate.wait()  # one that ended while carried over is settled in its carry group
                slot.playing = False  # from here on _settle counts it, with no await before it does
                group, carried, slot.carried_at = slot.group, slot.carried_at is not None, None  # a refill is fresh
                outcome = await self._settle(group, trajectory, carried=carried)
                if outcome not in ("error", "dropped") or not self._may_retry(group):
                    break
                group.retries += 1
                self.metrics.retried += 1
        except asyncio.CancelledError:
            if slot.playing:
                self.metrics.cancelled += 1
                if slot in self._carry:
                    self.metrics.carry_discarded += 1
        finally:
            self._running -= 1
            self._changed.set()
            if slot in self._carry:  # cancelled while carried over: it has left its group already
                self._carry.remove(slot)
                self.metrics.buffered(len(self._carry))
            else:
                await self._leave(slot.group)

    async def _leave(self, group: _Group) -> None:
        """A slot of ``group`` has ended: close the group if it was the last and no more will start."""
        group.running -= 1
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
            self._changed.set()
            await self._leave(group)

    async def _play(self, group: _Group) -> Trajectory:
        self.metrics.started += 1
        group.started += 1
        seed = (self.config.seed, group.result.index, group.started)
        return await self.runner.play(group.result.task, seed=seed, timeouts=self.config.timeouts)

    async def _settle(self, group: _Group, trajectory: Trajectory, *, carried: bool = False) -> Outcome:
        """Count a finished episode (``carried`` over, or not), decide its fate, and stream it unless it is thrown
        away."""
        outcome = self._judge(group, trajectory)
        if carried:
            self.metrics.count_carried(trajectory, kept=outcome == "kept")
        if outcome in ("error", "kept"):
            await asyncio.shield(self.stream.put(trajectory))
        return outcome

    def _judge(self, group: _Group, trajectory: Trajectory) -> Outcome:
        """Count a finished episode and decide its fate; the one that completes its group spares the rest."""
        result = group.result
        result.id.stamp(trajectory, group.size)
        self._clock()
        if trajectory.status == "error":
            self.metrics.count_error(trajectory)
            result.errors.append(trajectory)
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
            for slot in list(group.slots):
                if slot.task is not current:
                    self._spare(slot)
            if self.config.carry_over_resume == "at_once":
                self._adopt_due()
        return "kept"

    # -- carry-over -----------------------------------------------------------------------------

    def _spare(self, slot: _Slot) -> None:
        """A slot of a complete group: carried over while its episode plays and the buffer has room, else cancelled."""
        if not (self.config.carry_over and slot.playing and len(self._carry) < self.config.carry_over_limit):
            slot.task.cancel()
            return
        slot.group.slots.remove(slot)
        slot.group.running -= 1  # the group may close without it; the slot still runs (self._running)
        slot.gate.clear()
        slot.carried_at = self.version
        self._carry.append(slot)
        self.metrics.carried += 1
        if self.config.carry_over_resume != "at_once":  # adopted before it can pause: never buffered
            self.metrics.buffered(len(self._carry))

    def _adopt_due(self) -> None:
        """Give the carried-over episodes that may resume (the version has advanced since, or everything in flight
        is paused and nothing can start) carry groups, one per original group, and resume them; queue the groups'
        fresh episodes."""
        if not self._carry or self._stopping:
            return
        stalled = self._running == len(self._carry) and (self._exhausted or not self._has_room())
        at_once = self.config.carry_over_resume == "at_once"
        origins: dict[GroupId, list[_Slot]] = {}
        for slot in self._carry:
            if stalled or at_once or (slot.carried_at is not None and self.version > slot.carried_at):
                origins.setdefault(slot.group.result.id, []).append(slot)
        for slots in origins.values():
            origin = slots[0].group
            self._carry_groups[origin.result.index] += 1
            group = self._open(GroupResult(origin.result.index, origin.result.task,
                                           carry=self._carry_groups[origin.result.index]), origin.started)
            for slot in slots:
                self._carry.remove(slot)
                slot.group = group
                group.slots.append(slot)
                group.running += 1
                slot.gate.set()
            self.metrics.carry_groups += 1
            self._to_fill.append((group, max(0, group.size - len(slots))))
        self.metrics.buffered(len(self._carry))

    async def _resume_carried(self, tasks_group: asyncio.TaskGroup) -> None:
        """Adopt the carried-over episodes due, and fill every carry group waiting for its fresh episodes."""
        self._adopt_due()
        while self._to_fill:
            group, fresh = self._to_fill.popleft()
            await self._fill(group, fresh, tasks_group)

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
        del self._groups[group.result.id]
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
        tokens = self._engine_tokens()
        if self._tokens_before is not None and tokens is not None:
            self.metrics.engine_tokens = tokens - self._tokens_before

    def _engine_busy(self) -> float | None:
        stats = getattr(self.engine, "stats", None)
        return stats().busy_seconds if callable(stats) else None

    def _engine_tokens(self) -> int | None:
        stats = getattr(self.engine, "stats", None)
        return stats().generated_tokens if callable(stats) else None
