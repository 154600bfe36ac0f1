"""The policy protocol and the text policies: the oracle, random calls, anything written as
``act(env, messages, rng)`` (:class:`TextPolicy`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from agentgym.core import Env
from agentgym.messages import Message

if TYPE_CHECKING:
    from agentgym.trajectory import Trajectory


class PolicySession(Protocol):
    """One episode's state of a policy."""

    async def act(self, observation: list[Message]) -> str:
        """The agent's next message, given the messages the environment has just added."""
        ...

    def record(self, trajectory: Trajectory) -> None:
        """Write what the session alone knows (token ids, logprobs, versions) into ``trajectory``."""
        ...


class Policy(Protocol):
    """Chooses the agent's messages; ``name`` labels its results."""

    name: str

    def start(self, env: Env, rng: np.random.Generator) -> PolicySession:
        """A session for one episode in ``env``; ``rng`` belongs to the episode, so results do not
        depend on scheduling."""
        ...


class TextPolicy:
    """A policy that reads the whole conversation as messages each turn and answers with text."""

    name = "text"

    async def act(self, env: Env, messages: Sequence[Message], rng: np.random.Generator) -> str:
        """The next message."""
        raise NotImplementedError

    def start(self, env: Env, rng: np.random.Generator) -> PolicySession:
        return _TextSession(self, env, rng)


class _TextSession:
    def __init__(self, policy: TextPolicy, env: Env, rng: np.random.Generator) -> None:
        self.policy, self.env, self.rng = policy, env, rng
        self.messages: list[Message] = []

    async def act(self, observation: list[Message]) -> str:
        self.messages.extend(observation)
        action = await self.policy.act(self.env, self.messages, self.rng)
        self.messages.append(Message(role="assistant", content=action))
        return action

    def record(self, trajectory: Trajectory) -> None:
        """Text policies have no tokens to record."""


class OraclePolicy(TextPolicy):
    """Plays each environment's oracle: privileged, and solves every task it is given."""

    name = "oracle"

    async def act(self, env: Env, messages: Sequence[Message], rng: np.random.Generator) -> str:
        return env.oracle_action()


class RandomPolicy(TextPolicy):
    """Calls a random tool with random arguments of the right types: the floor any agent should beat."""

    name = "random"

    async def act(self, env: Env, messages: Sequence[Message], rng: np.random.Generator) -> str:
        return env.random_action(rng)


POLICIES: dict[str, type[TextPolicy]] = {"oracle": OraclePolicy, "random": RandomPolicy}


def get_policy(name: str) -> TextPolicy:
    """A reference policy by name."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)}") from None
