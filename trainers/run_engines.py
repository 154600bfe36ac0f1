"""A training run's engines: the one the rollout samples from and the trainer publishes to, and under a forced
lag a second one that evaluates; and the policies that sample from them."""

from __future__ import annotations

from pathlib import Path

import torch

from agentgym.errors import AgentGymError
from agentgym.inference import EngineSettings, engine_spec
from agentgym.inference.types import InferenceEngine, SleepingEngine
from agentgym.policies.lm import LMPolicy
from agentgym.rollout.background import BackgroundLoop
from agentgym.rollout.runner import Backend
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.forced_lag import LaggedEngine
from agentgym.trainers.learner import Learner
from agentgym.trainers.rank_group import RankGroup


class RunEngines:
    """Starts ``config.engine`` on ``backend`` from ``source`` (the model the run started from), brings engines up
    to ``learner``'s weights, and closes what it started. ``sleeps``: the engine sleeps between its turns on the
    device (colocated, or multiplexed with other jobs)."""

    def __init__(self, config: TrainConfig, backend: Backend, source: Path, device: torch.device,
                 learner: Learner | RankGroup, *, sleeps: bool) -> None:
        self.config, self.backend, self.source, self.device = config, backend, source, device
        self.learner, self.sleeps = learner, sleeps
        self.started: list[SleepingEngine] = []

    def rollout(self, background: BackgroundLoop, step: int) -> SleepingEngine:
        """The engine the rollout samples from and the trainer publishes its weights to, at ``step``'s weights
        (under a forced lag, it serves them that many versions late)."""
        engine = self._start()
        if step:
            background.run(engine.update_weights(self.learner.weights(), version=step))
        lag = self.config.trainer.forced_lag
        return engine if lag is None else LaggedEngine(engine, lag)

    def evaluation(self, background: BackgroundLoop, engine: InferenceEngine, step: int) -> InferenceEngine:
        """The engine that scores ``step``'s weights: the rollout's ``engine``, or under a forced lag a second one,
        brought up to the trainer's version."""
        if self.config.trainer.forced_lag is None:
            return engine
        second = self.started[1] if len(self.started) > 1 else self._start()
        if second.version != step:
            background.run(second.update_weights(self.learner.weights(), version=step))
        return second

    def policy(self, engine: InferenceEngine, temperature: float | None = None) -> LMPolicy:
        """A policy sampling from ``engine`` (under a forced lag, from the engine behind it) as the run's sampling
        and context settings say, at ``temperature`` where given."""
        if isinstance(engine, LaggedEngine):
            engine = engine.engine
        config = self.config
        contexts = {source.id: source.context for source in config.sources if source.context is not None}
        return LMPolicy(engine, config.sampling.params(temperature), max_context=config.engine.max_context,
                        context=config.context, contexts=contexts, name="learner")

    async def close(self) -> None:
        """Close every engine started, the rollout's first."""
        for engine in self.started:
            await engine.close()

    def _start(self) -> SleepingEngine:
        """An engine of ``config.engine`` on the model the run started from."""
        config = self.config.engine
        settings = EngineSettings(max_batch_size=config.max_batch_size, max_context=config.max_context,
                                  threads=config.threads, device=str(self.device), dtype=self.config.model.dtype,
                                  sleeps=self.sleeps)
        kwargs = {**engine_spec(config.name).kwargs(settings), **config.kwargs}
        # a LoRA run's checkpoint holds the adapter alone: a resumed run's engine starts from the base model, and is
        # sent the merged weights at once (:meth:`rollout`)
        source = Path(self.config.model.path) if self.config.model.lora else self.source
        engine = self.backend.engine(config.name, source, **kwargs)
        if not isinstance(engine, SleepingEngine):
            raise AgentGymError(f"the {config.name} engine cannot be trained: it has no sleep and wake_up")
        self.started.append(engine)
        return engine
