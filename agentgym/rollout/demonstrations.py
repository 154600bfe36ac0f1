"""Demonstrations in the rollout's token format: a text policy's turns recorded as the tokens a model
would have to write, for supervised warm starts (SFT) on exactly the data layout RL trains on."""

from __future__ import annotations

from typing import Any

import numpy as np

from agentgym.core import Env
from agentgym.messages import Message
from agentgym.policies import Policy
from agentgym.rollout.render import ChatRenderer
from agentgym.rollout.tokens import TokenRecord
from agentgym.trajectory import Trajectory


class DemonstrationPolicy:
    """Plays ``policy`` (usually the oracle) and records each of its messages, followed by the eos token,
    as agent tokens (``loss_mask`` 1; no behaviour logprob, version -1) with ``tokenizer``'s chat template."""

    def __init__(self, policy: Policy, tokenizer: Any) -> None:
        self.policy = policy
        self.renderer = ChatRenderer(tokenizer)
        self.name = f"{policy.name}-demonstrations"

    def start(self, env: Env, rng: np.random.Generator) -> DemonstrationSession:
        return DemonstrationSession(self, env, rng)


class DemonstrationSession:
    """One demonstrated episode: the inner policy acts, the record takes its text as tokens."""

    def __init__(self, policy: DemonstrationPolicy, env: Env, rng: np.random.Generator) -> None:
        self.inner = policy.policy.start(env, rng)
        self.renderer = policy.renderer
        self.tokens = TokenRecord(policy.renderer, [t.to_openai() for t in env.tools])

    async def act(self, observation: list[Message]) -> str:
        action = await self.inner.act(observation)
        self.tokens.observe(observation)
        self.tokens.respond(self.renderer.encode(action) + self.renderer.eos)
        return action

    def record(self, trajectory: Trajectory) -> None:
        self.tokens.write(trajectory)
        self.inner.record(trajectory)
