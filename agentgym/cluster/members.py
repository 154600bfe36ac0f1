"""Actors of one kind that share the work (env workers, engine replicas): the least loaded live one takes the
next job, and one that died is left out until it answers again (Ray restarts it, on another node if its own
is gone)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import ray
from ray.exceptions import RayTaskError

A = TypeVar("A")
logger = logging.getLogger(__name__)


class Members(Generic[A]):
    """``actors`` with a count of the jobs each holds; ``probe(actor)`` is a cheap call that answers once the
    actor is up again."""

    def __init__(self, actors: list[A], probe: Callable[[A], Any], kind: str) -> None:
        self.actors, self.kind = actors, kind
        self.load = [0] * len(actors)
        self.down: set[int] = set()
        self.lost = 0
        """Times a member was found dead."""
        self._probe = probe
        self._probing: dict[int, asyncio.Task[None]] = {}

    def pick(self, preferred: int | None = None) -> int:
        """``preferred`` while it is live, else the least loaded live member (any member when none is live:
        its calls wait for its restart)."""
        for index, probe in list(self._probing.items()):
            if probe.done():  # its event loop ended before the member answered: try the member again
                del self._probing[index]
                self.down.discard(index)
        if preferred is not None and preferred not in self.down:
            return preferred
        live = [i for i in range(len(self.actors)) if i not in self.down] or list(range(len(self.actors)))
        return min(live, key=lambda i: self.load[i])

    @contextlib.contextmanager
    def holding(self, index: int) -> Iterator[A]:
        """Count a job on member ``index`` while it runs."""
        self.load[index] += 1
        try:
            yield self.actors[index]
        finally:
            self.load[index] -= 1

    def died(self, index: int, cause: BaseException) -> None:
        """Leave member ``index`` out until a probe finds it restarted."""
        self.lost += 1
        if index in self.down:
            return
        logger.warning("%s %d died (%s); Ray restarts it, and the others take its work meanwhile",
                       self.kind, index, str(cause).splitlines()[0] if str(cause) else type(cause).__name__)
        self.down.add(index)
        self._probing[index] = asyncio.get_running_loop().create_task(self._back(index))

    async def _back(self, index: int) -> None:
        while True:
            try:
                await self._probe(self.actors[index])
            except ray.exceptions.RayActorError:
                await asyncio.sleep(0.5)
                continue
            self.down.discard(index)
            del self._probing[index]
            return

    def stop_probing(self) -> None:
        """Stop waiting for members to come back (before the event loop ends)."""
        for task in self._probing.values():
            task.cancel()


async def answer(ref: ray.ObjectRef[Any]) -> Any:
    """The value of an actor call; cancelling the caller cancels the call, and an exception raised inside it is
    raised here as itself (``RayActorError`` when the actor died)."""
    try:
        return await ref
    except asyncio.CancelledError:
        ray.cancel(ref)
        raise
    except RayTaskError as exc:
        raise exc.as_instanceof_cause() from None  # type: ignore[no-untyped-call]
