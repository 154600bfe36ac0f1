"""A forced lag (``trainer.forced_lag``): the rollout's engine serves weights that trail the trainer's by exactly K
versions, so staleness is a controlled variable rather than a property of the machine's speed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from agentgym.inference.types import EngineStats, GenerationRequest, GenerationResult, SleepingEngine


class LaggedEngine:
    """Wraps the rollout's engine: :meth:`update_weights` with the trainer's version ``t`` keeps a CPU copy of those
    weights and loads version ``t - lag`` into the engine (until then the engine keeps the weights it has, so the
    first ``lag`` steps all sample the starting version). :attr:`version` is the scheduler's clock, ``t - lag``:
    with ``async_ratio`` 0 it admits one batch per published version, and every token it samples for the step
    that trains at ``t`` carries version ``t - lag``. The rest is the wrapped engine's."""

    def __init__(self, engine: SleepingEngine, lag: int) -> None:
        self.engine, self.lag = engine, lag
        self._trainer_version = engine.version
        self._kept: dict[int, dict[str, torch.Tensor]] = {}
        """The trainer's weights by version, from the one the engine will load next on."""

    @property
    def version(self) -> int:
        return self._trainer_version - self.lag

    async def update_weights(self, weights: Mapping[str, Any] | str | Path, *, version: int | None = None) -> int:
        """Keep ``weights`` (a state dict) as the trainer's ``version`` and let the engine catch up to ``version -
        lag``; returns the scheduler's clock."""
        if not isinstance(weights, Mapping):
            raise TypeError("a lagged engine keeps state dicts, not checkpoint folders")
        self._trainer_version = self._trainer_version + 1 if version is None else version
        self._kept[self._trainer_version] = {name: tensor.detach().to("cpu", copy=True)
                                             for name, tensor in weights.items()}
        due = self.version
        if due > self.engine.version and due in self._kept:
            await self.engine.update_weights(self._kept[due], version=due)
        for old in [v for v in self._kept if v <= max(due, self.engine.version)]:
            del self._kept[old]
        return self.version

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def tokenizer(self) -> Any:
        return self.engine.tokenizer

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        return await self.engine.generate(request)

    def stats(self) -> EngineStats:
        return self.engine.stats()

    def reset_stats(self) -> None:
        self.engine.reset_stats()

    async def sleep(self) -> None:
        await self.engine.sleep()

    async def wake_up(self) -> None:
        await self.engine.wake_up()

    async def close(self) -> None:
        await self.engine.close()
