"""A policy backed by a token-level inference engine: the agent whose trajectories a trainer learns from."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import numpy as np

from agentgym.core import Env
from agentgym.errors import AgentGymError, ContextLimit
from agentgym.inference.tree import LatrParams
from agentgym.inference.types import (
    GenerationRequest,
    GenerationResult,
    InferenceEngine,
    SamplingParams,
    TreeEngine,
    TreeResult,
)
from agentgym.messages import Message
from agentgym.policies.context import ContextPolicy
from agentgym.policies.render import ChatRenderer
from agentgym.policies.tokens import TokenRecord
from agentgym.trajectory import Trajectory


class EngineAborted(AgentGymError):
    """The engine stopped before the response was finished (shut down or aborted)."""


class LMPolicy:
    """Samples each turn from ``engine`` (token-in, token-out) and records every token with its mask,
    behaviour logprob and policy version. ``max_context`` caps prompt plus response; ``context`` (or, for an
    environment made under an id in ``contexts``, that one) says how a conversation is kept within it and how an
    episode that outgrows it ends."""

    def __init__(
        self,
        engine: InferenceEngine,
        sampling: SamplingParams | None = None,
        *,
        max_context: int = 4096,
        context: ContextPolicy | None = None,
        contexts: Mapping[str, ContextPolicy] | None = None,
        name: str | None = None,
    ) -> None:
        self.engine = engine
        self.sampling = sampling or SamplingParams()
        self.max_context = max_context
        self.context = context or ContextPolicy()
        self.contexts = dict(contexts or {})
        self.renderer = ChatRenderer(engine.tokenizer)
        self.name = name or f"{engine.name}-model"

    def context_for(self, env: Env) -> ContextPolicy:
        """The context policy of episodes in ``env``: its id's own, else the policy's."""
        spec = getattr(env, "spec", None)
        return self.contexts.get(getattr(spec, "id", ""), self.context)

    def token_record(self, env: Env) -> TokenRecord:
        """An empty token record for an episode in ``env``, with its context policy and budget."""
        context = self.context_for(env)
        budget = None
        if context.strategy != "none":
            budget = context.budget or max(1, self.max_context - self.sampling.max_tokens)
        return TokenRecord(self.renderer, [t.to_openai() for t in env.tools], context, budget)

    def start(self, env: Env, rng: np.random.Generator) -> TokenSession:
        return TokenSession(self, env, rng)

    def turn_sampling(self, rng: np.random.Generator) -> SamplingParams:
        """The sampling settings of one turn (override to vary them per turn); ``rng`` is the episode's."""
        return self.sampling


class TokenSession:
    """One episode of an engine-backed policy: each turn extends the token record and samples from it."""

    def __init__(self, policy: LMPolicy, env: Env, rng: np.random.Generator) -> None:
        self.policy, self.env, self.rng = policy, env, rng
        self.tokens = policy.token_record(env)
        self.id = uuid.uuid4().hex
        """Routes the episode's requests to one engine replica (a fork keeps its parent's, to share its prefix)."""

    async def act(self, observation: list[Message]) -> str:
        result = await self.policy.engine.generate(self._request(observation))
        return self.take(result)

    async def grow(self, observation: list[Message], params: LatrParams, width: int) -> TreeResult:
        """This turn's answers as a tree of at most ``width`` branches (the engine's LATR tree phase): the
        first branch is this session's own; :meth:`take` one, and :meth:`fork` the session for each other."""
        engine = self.policy.engine
        if not isinstance(engine, TreeEngine):
            raise AgentGymError(f"tree rollouts need an engine that grows trees (torch or vllm), not {engine.name}")
        return await engine.generate_tree(self._request(observation), params, width)

    def take(self, result: GenerationResult) -> str:
        """Record ``result`` as this turn's response; the agent's text."""
        if result.finish_reason == "abort":
            raise EngineAborted("the engine aborted the request (it was shut down)")
        return self.tokens.respond(result.token_ids, result.logprobs, result.versions,
                                   tree_chosen=result.tree_chosen or None)

    def fork(self, rng: np.random.Generator) -> TokenSession:
        """A session that goes on from this one's record (a forked episode's), with its own ``rng``; its requests
        go where this one's do, whose cache holds the prefix they share."""
        twin = TokenSession(self.policy, self.env, rng)
        twin.tokens, twin.id = self.tokens.copy(), self.id
        return twin

    def _request(self, observation: list[Message]) -> GenerationRequest:
        """Hear ``observation`` and ask for the next response within the context that is left."""
        context = self.tokens.observe(observation)
        room = self.policy.max_context - len(context)
        if room < 1:
            policy = self.tokens.context
            raise ContextLimit(f"the conversation fills the context ({len(context)} of {self.policy.max_context} "
                               "tokens)", policy.overflow, policy.penalty)
        sampling = self.policy.turn_sampling(self.rng)
        sampling = sampling.model_copy(update={"max_tokens": min(sampling.max_tokens, room), "seed": int(self.rng.integers(2**31))})
        return GenerationRequest(prompt_ids=context, images=list(self.tokens.images), sampling=sampling,
                                 session=self.id)

    def record(self, trajectory: Trajectory) -> None:
        self.tokens.write(trajectory)
