"""Handing what the torch engine's worker thread computed to the event loop that awaits it."""

from __future__ import annotations

import asyncio
from typing import Any


def settle_future(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    """Resolve ``future`` from the worker thread on its own event loop (unless done or the loop closed)."""

    def settle() -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the caller's event loop is closed: nobody is waiting any more
        pass
