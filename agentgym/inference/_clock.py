"""Counters for engines whose work happens elsewhere (a server, vLLM's loop): busy means at least
one request is in flight."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from agentgym.inference.types import EngineStats


class RequestClock:
    """Keeps :class:`EngineStats`; wrap each request in :meth:`busy`."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start counting afresh."""
        self.counts = EngineStats()
        self._started = self._since = time.perf_counter()
        self._in_flight = 0

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Count the time during which at least one request is in flight."""
        if self._in_flight == 0:
            self._since = time.perf_counter()
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self.counts.busy_seconds += time.perf_counter() - self._since

    def snapshot(self) -> EngineStats:
        """The counters now, with the running busy period and the wall time included."""
        now = time.perf_counter()
        busy = self.counts.busy_seconds + (now - self._since if self._in_flight else 0.0)
        return self.counts.model_copy(update={"busy_seconds": busy, "wall_seconds": now - self._started})
