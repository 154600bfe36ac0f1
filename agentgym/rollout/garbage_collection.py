"""Garbage collection during large rollouts.

A thousand live episodes hold hundreds of thousands of small objects (messages, turns, tool calls);
CPython's generational collector rescans them over and over, which measured at about half of the
rollout's time at 1,000 concurrent episodes. While a rollout runs, the objects that existed before
it are frozen out of the collector's sight (``gc.freeze``) and the young generation is collected less
often; both are restored when the last rollout in the process ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_active = 0
_saved: tuple[int, int, int] = gc.get_threshold()


@contextmanager
def relaxed_gc(young_threshold: int = 50_000) -> Iterator[None]:
    """Collect less often inside the block (re-entrant across threads; the outermost block restores)."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(young_threshold, _saved[0]), _saved[1], max(_saved[2], 100))
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                gc.set_threshold(*_saved)
                gc.unfreeze()
