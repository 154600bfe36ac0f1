"""A policy backed by a token-level inference engine: the agent whose trajectories a trainer learns from."""

from __future__ import annotations

import numpy as np

from agentgym.core import Env
from agentgym.errors import AgentGymError, ContextLimit
from agentgym.inference.types import GenerationRequest, InferenceEngine, SamplingParams
from agentgym.messages import Message
from agentgym.rollout.render import ChatRenderer
from agentgym.trajectory import Trajectory


class EngineAborted(AgentGymError):
    """The engine stopped before the response was finished (shut down or aborted)."""


class LMPolicy:
    """Samples each turn from ``engine`` (token-in, token-out) and records every token with its mask,
    behaviour logprob and policy version. ``max_context`` caps prompt plus response; a conversation
    that outgrows it ends the episode as ``truncated``."""

    def __init__(
        self,
        engine: InferenceEngine,
        sampling: SamplingParams | None = None,
        *,
        max_context: int = 4096,
        name: str | None = None,
    ) -> None:
        self.engine = engine
        self.sampling = sampling or SamplingParams()
        self.max_context = max_context
        self.renderer = ChatRenderer(engine.tokenizer)
        self.name = name or f"{engine.name}-model"

    def start(self, env: Env, rng: np.random.Generator) -> TokenSession:
        return TokenSession(self, env, rng)

    def turn_sampling(self, rng: np.random.Generator) -> SamplingParams:
        """The sampling settings of one turn (override to vary them per turn); ``rng`` is the episode's."""
        return self.sampling


class TokenSession:
    """One episode's token record: ids grow by observation deltas and generated responses only."""

    def __init__(self, policy: LMPolicy, env: Env, rng: np.random.Generator) -> None:
        self.policy, self.env, self.rng = policy, env, rng
        self.token_ids: list[int] = []
        self.loss_mask: list[int] = []
        self.logprobs: list[float] = []
        self.versions: list[int] = []
        self.prompt_lengths: list[int] = []
        """Length of the ids the engine saw at each turn (each a prefix of the next)."""
        self._close: list[int] = []

    async def act(self, observation: list[Message]) -> str:
        renderer = self.policy.renderer
        messages = [m.to_openai() for m in observation]
        if self.token_ids:
            new = self._close + renderer.observation_ids(messages)
        else:
            new = renderer.prompt_ids(messages, [t.to_openai() for t in self.env.tools])
        self._extend(new)
        room = self.policy.max_context - len(self.token_ids)
        if room < 1:
            raise ContextLimit(f"the conversation fills the context ({len(self.token_ids)} of {self.policy.max_context} tokens)")
        sampling = self.policy.turn_sampling(self.rng)
        sampling = sampling.model_copy(update={"max_tokens": min(sampling.max_tokens, room), "seed": int(self.rng.integers(2**31))})
        self.prompt_lengths.append(len(self.token_ids))
        result = await self.policy.engine.generate(GenerationRequest(prompt_ids=list(self.token_ids), sampling=sampling))
        if result.finish_reason == "abort":
            raise EngineAborted("the engine aborted the request (it was shut down)")
        self._extend(result.token_ids, result.logprobs, result.versions)
        self._close = renderer.close_ids(result.token_ids)
        return renderer.response_text(result.token_ids)

    def record(self, trajectory: Trajectory) -> None:
        """Close the last response the way the template would, then copy the record."""
        self._extend(self._close)
        self._close = []
        trajectory.token_ids = list(self.token_ids)
        trajectory.loss_mask = list(self.loss_mask)
        trajectory.logprobs = list(self.logprobs)
        trajectory.versions = list(self.versions)
        trajectory.info["prompt_lengths"] = list(self.prompt_lengths)

    def _extend(self, ids: list[int], logprobs: list[float] | None = None, versions: list[int] | None = None) -> None:
        """Append ids: the model's own (with logprobs and versions) or the environment's (masked out)."""
        self.token_ids.extend(ids)
        generated = logprobs is not None
        self.loss_mask.extend([int(generated)] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.versions.extend(versions if versions is not None else [-1] * len(ids))
