"""A multiplexed job's turns on its group's pools, as its training loop takes them: the rollout pool while it
collects a batch (its engine awake) and the training pool while it learns and publishes (its learner on the
device); between turns both stay warm in host memory."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from agentgym.inference.types import SleepingEngine
from agentgym.rollout.background import BackgroundLoop
from agentgym.trainers.learner import Learner
from agentgym.trainers.mux.client import MuxClient
from agentgym.trainers.mux.estimate import Pool
from agentgym.trainers.rank_group import RankGroup


class PoolTurns:
    """Takes and gives back ``client``'s permits around a step's two phases, switching ``engine`` and ``learner``
    between warm (host memory) and active, and counts the waits and the switches for the step's metrics.
    ``early_release``: the share of a batch's groups closed after which the rollout permit goes to the next job
    while this one's stragglers finish beside it (``None``: held to the end)."""

    def __init__(self, client: MuxClient, background: BackgroundLoop, engine: SleepingEngine,
                 learner: Learner | RankGroup, *, early_release: float | None) -> None:
        self.client, self.background, self.engine, self.learner = client, background, engine, learner
        self.early_release = early_release
        self._seconds = {"rollout_wait": 0.0, "train_wait": 0.0, "switch": 0.0}
        self._switches = 0

    @contextlib.contextmanager
    def rollout(self) -> Iterator[None]:
        """The rollout pool, the engine awake; on leaving, the engine asleep and the permit given back."""
        self._take("rollout")
        self._switch(lambda: self.background.run(self.engine.wake_up()))
        try:
            yield
        finally:
            self._switch(lambda: self.background.run(self.engine.sleep()))
            self.client.release("rollout")

    def closed(self, groups: int, wanted: int) -> None:
        """``groups`` of the batch's ``wanted`` have closed: past ``early_release``, let the next job roll out."""
        if self.early_release is not None and groups >= self.early_release * wanted and groups < wanted:
            self.client.release("rollout")

    @contextlib.contextmanager
    def train(self) -> Iterator[None]:
        """The training pool, the learner's states on its device; on leaving, offloaded and the permit given back."""
        self._take("train")
        self._switch(self.learner.onload)
        try:
            yield
        finally:
            self._switch(self.learner.offload)
            self.client.release("train")

    def metrics(self, step: int) -> dict[str, float]:
        """The waits and switches since the last call (``mux/...``), and ``step`` told to the scheduler."""
        self.client.step = step
        switches = max(1, self._switches)
        values = {"mux/rollout_wait_seconds": self._seconds["rollout_wait"],
                  "mux/train_wait_seconds": self._seconds["train_wait"],
                  "mux/switch_seconds": self._seconds["switch"] / switches}
        self._seconds = dict.fromkeys(self._seconds, 0.0)
        self._switches = 0
        return values

    def _take(self, pool: Pool) -> None:
        started = time.perf_counter()
        self.client.acquire(pool)
        self._seconds[f"{pool}_wait"] += time.perf_counter() - started

    def _switch(self, change: Callable[[], object]) -> None:
        started = time.perf_counter()
        change()
        self._seconds["switch"] += time.perf_counter() - started
        self._switches += 1
