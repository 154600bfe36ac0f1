"""One training step and the publish of its weights to the inference engine, in the order colocation needs."""

from __future__ import annotations

import time
from collections.abc import Callable

from agentgym.inference.types import SleepingEngine
from agentgym.rollout.background import BackgroundLoop
from agentgym.rollout.scheduler import RolloutScheduler
from agentgym.trainers.learner import Learner
from agentgym.trainers.rank_group import RankGroup


def train_and_publish(background: BackgroundLoop, engine: SleepingEngine, learner: Learner | RankGroup,
                      scheduler: RolloutScheduler, learn: Callable[[], dict[str, float]], *,
                      colocate: bool) -> dict[str, float]:
    """Run ``learn`` (one optimizer step; returns its metrics) and publish the new weights to ``engine``,
    which the rollout keeps sampling from on ``background``. Returns ``learn``'s metrics with
    ``time/publish_seconds``. The steps, in order (1, 2, 4 and 6 only when ``colocate``: the learner and
    the engine share one device, and only one of them holds it at a time):

    1. ``engine.sleep()``: the engine frees the device (its requests wait);
    2. ``learner.onload()``: the learner's weights and optimizer state come back to the device; then ``learn``;
    3. ``learner.weights()``: the full state dict is gathered while the engine still sleeps, so the
       gather has the device's memory to itself;
    4. ``engine.wake_up()``: the engine must be awake to load weights onto the device;
    5. ``engine.update_weights(...)`` with the learner's version: requests in flight continue under it;
    6. the state dict is dropped and ``learner.offload()`` frees the device for the engine, only once the
       engine has copied the weights;
    7. ``scheduler.notify``: last, so the scheduler wakes at once and admits the episodes the staleness
       bound allows against the version the engine now serves, never one it has yet to load.
    """
    if colocate:
        background.run(engine.sleep())
        learner.onload()
    metrics = learn()
    publish_started = time.perf_counter()
    weights = learner.weights()
    if weights is None:
        raise RuntimeError("the trainer's learner is rank 0 and gathers the whole state dict")
    if colocate:
        background.run(engine.wake_up())
    background.run(engine.update_weights(weights, version=learner.version))
    if colocate:
        del weights
        learner.offload()
    metrics["time/publish_seconds"] = time.perf_counter() - publish_started
    background.call(scheduler.notify)
    return metrics
