"""Objects the environments on one event loop share (a sandbox pool, a browser), counted by who holds them.

An object is closed when its last holder lets go, unless its key is one this process keeps (:func:`keep_idle`):
a process that makes environment after environment of one kind (a check worker) keeps their Chromium running
between them, and closes it with :func:`close_idle` before it exits.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

_kept_keys: set[Hashable] = set()
_instances: weakref.WeakSet[LoopShared[object]] = weakref.WeakSet()


def keep_idle(key: Hashable) -> None:
    """From now on, an object shared under ``key`` that its last holder lets go stays open, for the next
    :meth:`LoopShared.retain` of that key on its loop, until :func:`close_idle`."""
    _kept_keys.add(key)


async def close_idle() -> None:
    """Close every object of the running loop that is kept without a holder."""
    for shared in list(_instances):
        await shared.close_idle()


class LoopShared(Generic[T]):
    """One object per (running event loop, key), made on first :meth:`retain` and closed by ``close`` when
    the last holder calls :meth:`release` (or, for a key of :func:`keep_idle`, by :func:`close_idle`)."""

    def __init__(self, close: Callable[[T], Awaitable[None]]) -> None:
        self._close = close
        self._held: dict[tuple[int, Hashable], tuple[T, int]] = {}
        _instances.add(self)  # type: ignore[arg-type]

    def retain(self, key: Hashable, make: Callable[[], T]) -> T:
        """The object of ``key`` on the running loop (``make()`` when there is none yet)."""
        slot = (id(asyncio.get_running_loop()), key)
        shared, holders = self._held.get(slot, (None, 0))
        if shared is None:
            shared = make()
        self._held[slot] = (shared, holders + 1)
        return shared

    async def release(self, shared: T) -> None:
        """Let go of an object from :meth:`retain`; the last holder closes it, unless its key is kept."""
        for slot, (held, holders) in list(self._held.items()):
            if held is shared:
                if holders > 1 or slot[1] in _kept_keys:
                    self._held[slot] = (held, holders - 1)
                    return
                del self._held[slot]
        await self._close(shared)

    async def close_idle(self) -> None:
        """Close this kind's objects of the running loop that are kept without a holder."""
        loop = id(asyncio.get_running_loop())
        for slot, (held, holders) in list(self._held.items()):
            if slot[0] == loop and holders == 0:
                del self._held[slot]
                await self._close(held)
