"""Objects the environments on one event loop share (a sandbox pool, a browser), counted by who holds them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class LoopShared(Generic[T]):
    """One object per (running event loop, key), made on first :meth:`retain` and closed by ``close`` when
    the last holder calls :meth:`release`."""

    def __init__(self, close: Callable[[T], Awaitable[None]]) -> None:
        self._close = close
        self._held: dict[tuple[int, Hashable], tuple[T, int]] = {}

    def retain(self, key: Hashable, make: Callable[[], T]) -> T:
        """The object of ``key`` on the running loop (``make()`` when there is none yet)."""
        slot = (id(asyncio.get_running_loop()), key)
        shared, holders = self._held.get(slot, (None, 0))
        if shared is None:
            shared = make()
        self._held[slot] = (shared, holders + 1)
        return shared

    async def release(self, shared: T) -> None:
        """Let go of an object from :meth:`retain`; the last holder closes it."""
        for slot, (held, holders) in list(self._held.items()):
            if held is shared:
                if holders > 1:
                    self._held[slot] = (held, holders - 1)
                    return
                del self._held[slot]
        await self._close(shared)
