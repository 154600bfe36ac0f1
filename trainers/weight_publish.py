"""The learner's turn on the device and the publish of its weights to the inference engine, in the order
colocation needs."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

from agentgym.inference.types import SleepingEngine
from agentgym.rollout.background import BackgroundLoop
from agentgym.trainers.learner import Learner
from agentgym.trainers.rank_group import RankGroup


class LearnerTurn:
    """A context for one optimizer step and the publish that ends it, on ``engine`` which the rollout keeps
    sampling from on ``background``. With ``colocate`` the learner and the engine share one device and only one of
    them holds it at a time; the steps, in order (1, 2, 4 and 6 only when ``colocate``):

    1. entering: ``engine.sleep()`` frees the device (its requests wait);
    2. ``learner.onload()`` brings the learner's weights and optimizer state back; the step runs in the block;
    3. :meth:`publish`: ``learner.weights()`` gathers the full state dict while the engine still sleeps, so the
       gather has the device's memory to itself;
    4. ``engine.wake_up()``: the engine must be awake to load weights onto the device;
    5. ``engine.update_weights(...)`` with the learner's version: requests in flight continue under it;
    6. leaving: the state dict is gone, and ``learner.offload()`` frees the device for the engine, only once the
       engine has copied the weights.

    The caller then tells the scheduler (``notify``), so that it admits episodes against the version the engine now
    serves, never one it has yet to load. :attr:`publish_seconds` is the time from 3 to 6.
    """

    def __init__(self, background: BackgroundLoop, engine: SleepingEngine, learner: Learner | RankGroup, *,
                 colocate: bool) -> None:
        self.background, self.engine, self.learner, self.colocate = background, engine, learner, colocate
        self.publish_seconds = 0.0
        self._published_at: float | None = None

    def __enter__(self) -> Self:
        if self.colocate:
            self.background.run(self.engine.sleep())
            self.learner.onload()
        return self

    def publish(self) -> None:
        """Send the learner's new weights to the engine under the learner's version."""
        self._published_at = time.perf_counter()
        weights = self.learner.weights()
        if weights is None:
            raise RuntimeError("the trainer's learner is rank 0 and gathers the whole state dict")
        if self.colocate:
            self.background.run(self.engine.wake_up())
        self.background.run(self.engine.update_weights(weights, version=self.learner.version))

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is not None:
            return
        if self._published_at is None:
            raise RuntimeError("a learner's turn ended without publishing its weights")
        if self.colocate:
            self.learner.offload()
        self.publish_seconds = time.perf_counter() - self._published_at
