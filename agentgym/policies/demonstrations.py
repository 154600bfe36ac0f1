"""Demonstrations in the rollout's token format: a text policy's turns recorded as the tokens a model
would have to write, for supervised warm starts (SFT) on exactly the data layout RL trains on."""

from __future__ import annotations

from typing import Any

import numpy as np

from agentgym.core import Env
from agentgym.messages import Message
from agentgym.policies import Policy
from agentgym.policies.render import ChatRenderer
from agentgym.policies.tokens import TokenRecord
from agentgym.trajectory import Trajectory


class DemonstrationPolicy:
    """Plays ``policy`` (usually the oracle) and records each of its messages, followed by the eos token,
    as agent tokens (``loss_mask`` 1; no behaviour logprob, version -1) with ``tokenizer``'s chat template.

    With ``noise`` > 0, that share of turns plays the environment's random action instead and leaves it out
    of the loss (``loss_mask`` 0): the demonstrations then show how to recover from a mistake, states that a
    flawless policy never visits (DART, Laskey et al. 2017). ``policy`` must act from the current state."""

    def __init__(self, policy: Policy, tokenizer: Any, *, noise: float = 0.0) -> None:
        if not 0 <= noise < 1:
            raise ValueError(f"noise must lie in [0, 1), got {noise}")
        self.policy = policy
        self.renderer = ChatRenderer(tokenizer)
        self.noise = noise
        self.name = f"{policy.name}-demonstrations"

    def start(self, env: Env, rng: np.random.Generator) -> DemonstrationSession:
        return DemonstrationSession(self, env, rng)


class DemonstrationSession:
    """One demonstrated episode: the inner policy acts, the record takes its text as tokens."""

    def __init__(self, policy: DemonstrationPolicy, env: Env, rng: np.random.Generator) -> None:
        self.inner = policy.policy.start(env, rng)
        self.env, self.rng, self.noise = env, rng, policy.noise
        self.renderer = policy.renderer
        self.tokens = TokenRecord(policy.renderer, [t.to_openai() for t in env.tools])

    async def act(self, observation: list[Message]) -> str:
        mistake = self.noise > 0 and self.rng.random() < self.noise
        action = self.env.random_action(self.rng) if mistake else await self.inner.act(observation)
        self.tokens.observe(observation)
        self.tokens.respond(self.renderer.encode(action) + self.renderer.eos, learn=not mistake)
        return action

    def record(self, trajectory: Trajectory) -> None:
        self.tokens.write(trajectory)
        self.inner.record(trajectory)
