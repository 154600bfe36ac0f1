"""The bounded stream of finished trajectories between rollout and trainer.

Producers wait when it is full (backpressure). Consumers read single trajectories as they finish
(``async for``/:meth:`get`) or whole groups (:meth:`groups`): a group is yielded once the scheduler
has closed it with all of its kept members; infrastructure-error trajectories are delivered to
single readers but never enter a group. :meth:`closed_groups` also yields the groups that failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentgym.rollout.group_id import GroupId
from agentgym.trajectory import Trajectory


@dataclass(frozen=True)
class _GroupEnd:
    group: GroupId
    complete: bool


@dataclass(frozen=True)
class ClosedGroup:
    """A group the scheduler has closed: its id, its kept members, and whether it got all of them."""

    id: GroupId
    members: list[Trajectory]
    complete: bool


_CLOSED = object()


class TrajectoryStream:
    """A bounded queue of trajectories with group boundaries."""

    def __init__(self, maxsize: int = 256) -> None:
        self._queue: asyncio.Queue[Trajectory | _GroupEnd | object] = asyncio.Queue(maxsize)
        self._closed = False
        self._pending: dict[GroupId, list[Trajectory]] = {}

    async def put(self, trajectory: Trajectory) -> None:
        """Add a finished trajectory; waits while the stream is full."""
        await self._queue.put(trajectory)

    async def end_group(self, group: GroupId, *, complete: bool) -> None:
        """Say that ``group`` will get no more members; an incomplete group is discarded."""
        await self._queue.put(_GroupEnd(group, complete))

    async def close(self) -> None:
        """No more trajectories will come; readers finish after the ones queued."""
        if not self._closed:
            self._closed = True
            await self._queue.put(_CLOSED)

    def qsize(self) -> int:
        return self._queue.qsize()

    async def get(self) -> Trajectory | None:
        """The next finished trajectory, or ``None`` once the stream is closed and drained."""
        while True:
            item = await self._next()
            if item is None or isinstance(item, Trajectory):
                return item

    def __aiter__(self) -> AsyncIterator[Trajectory]:
        return self._trajectories()

    async def _trajectories(self) -> AsyncIterator[Trajectory]:
        while (trajectory := await self.get()) is not None:
            yield trajectory

    async def groups(self) -> AsyncIterator[list[Trajectory]]:
        """Complete groups of kept trajectories, each once all its members have finished."""
        async for group in self.closed_groups():
            if group.complete and group.members:
                yield group.members

    async def closed_groups(self) -> AsyncIterator[ClosedGroup]:
        """Every group as the scheduler closes it, complete or not."""
        while (item := await self._next()) is not None:
            if isinstance(item, Trajectory):
                if item.status != "error":
                    self._pending.setdefault(GroupId.of(item), []).append(item)
            else:
                yield ClosedGroup(item.group, self._pending.pop(item.group, []), item.complete)

    async def get_batch(self, size: int) -> list[Trajectory]:
        """``size`` trajectories (fewer only if the stream closes first)."""
        batch: list[Trajectory] = []
        while len(batch) < size and (trajectory := await self.get()) is not None:
            batch.append(trajectory)
        return batch

    async def _next(self) -> Trajectory | _GroupEnd | None:
        item = await self._queue.get()
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)  # let every other reader see the end too
            return None
        return item  # type: ignore[return-value]
