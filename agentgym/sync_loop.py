"""The event loop behind the synchronous API (``reset``, ``step``, ``close``) of every ``inline`` environment in a
process: one, on a daemon thread of its own. What environments share per event loop (a Chromium, a sandbox pool, a
served site) is then shared by all of them used synchronously, as it is by the environments of one rollout; one
event loop per environment would start a Chromium (and its driver) for each.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
CANCEL_WAIT = 10.0
"""Seconds an interrupted call waits for its coroutine to unwind (close what it opened) before it raises."""

_lock = threading.Lock()
_thread: threading.Thread | None = None
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None


def on_it() -> bool:
    """Whether the calling thread is the shared loop's (where a blocking :func:`run` would wait for itself)."""
    return _thread is not None and _thread is threading.current_thread()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on the shared loop and wait for its result. An interrupt of the wait (Ctrl-C, or a signal
    the CLI turns into one) cancels the coroutine and waits up to :data:`CANCEL_WAIT` for it to unwind."""
    started, unwound = threading.Event(), threading.Event()
    future = None
    try:
        future = asyncio.run_coroutine_threadsafe(_tracked(coroutine, started, unwound), _shared())
        return future.result()
    except BaseException:
        if future is not None and future.cancel() and started.is_set():
            unwound.wait(CANCEL_WAIT)
        raise


async def _tracked(coroutine: Coroutine[Any, Any, T], started: threading.Event, unwound: threading.Event) -> T:
    """``coroutine``, saying when it started and when it ended."""
    started.set()
    try:
        return await coroutine
    finally:
        unwound.set()


def _shared() -> asyncio.AbstractEventLoop:
    """The shared loop, started on first use (and again in a forked child, which has none of the parent's
    threads)."""
    global _thread, _loop, _pid
    with _lock:
        if _loop is None or _thread is None or _pid != os.getpid() or not _thread.is_alive():
            _pid, _loop = os.getpid(), asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="agentgym-sync-envs", daemon=True)
            _thread.start()
        return _loop

