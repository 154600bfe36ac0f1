"""An asyncio event loop on its own thread, for synchronous code that drives asynchronous rollouts."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Self, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """Runs an event loop on a daemon thread until :meth:`close`; coroutines are handed to it from outside."""

    def __init__(self, name: str = "agentgym-rollout") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the loop; the returned future completes with its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (raising what it raises)."""
        return self.submit(coro).result()

    def call(self, callback: Any, *args: Any) -> None:
        """Call ``callback(*args)`` on the loop's thread, soon."""
        self.loop.call_soon_threadsafe(callback, *args)

    def close(self) -> None:
        """Stop the loop and join its thread; calling it again does nothing."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
