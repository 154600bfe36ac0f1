"""One core for the rollout, the other for the trainer, inside one training process (Linux thread affinity)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def pinned(rollout: int = 0, trainer: int = 1, every: float = 0.2) -> Iterator[dict[str, list[int]]]:
    """While inside, the calling thread (the trainer's optimizer steps) runs on core ``trainer`` and every other
    thread of this process (the rollout's event loop and environments, the engine, torch's workers) on core
    ``rollout``: a watcher pins each thread as it appears. Yields the cores of each."""
    main, everywhere = threading.get_native_id(), os.sched_getaffinity(0)
    stop = threading.Event()

    def watch() -> None:
        while True:
            for task in Path("/proc/self/task").iterdir():
                tid = int(task.name)
                try:
                    os.sched_setaffinity(tid, {trainer} if tid == main else {rollout})
                except (ProcessLookupError, PermissionError):
                    pass  # the thread has ended
            if stop.wait(every):
                return

    watcher = threading.Thread(target=watch, name="core-pinning", daemon=True)
    watcher.start()
    try:
        yield {"rollout": [rollout], "trainer": [trainer]}
    finally:
        stop.set()
        watcher.join()
        for task in Path("/proc/self/task").iterdir():
            try:
                os.sched_setaffinity(int(task.name), everywhere)
            except (ProcessLookupError, PermissionError):
                pass
