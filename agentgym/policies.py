"""Reference policies that act on text: the oracle (a perfect player) and a random caller of tools.

A policy sees the environment, the conversation so far and a random generator owned by the
episode, and returns the agent's next message. Model-backed agents come from the inference engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from agentgym.core import Env
from agentgym.messages import Message


class Policy(Protocol):
    """Chooses the agent's next message."""

    name: str

    async def act(self, env: Env, messages: Sequence[Message], rng: np.random.Generator) -> str:
        """The next message; ``rng`` belongs to this episode, so results do not depend on scheduling."""
        ...


class OraclePolicy:
    """Plays each environment's oracle: privileged, and solves every task it is given."""

    name = "oracle"

    async def act(self, env: Env, messages: Sequence[Message], rng: np.random.Generator) -> str:
        return env.oracle_action()


class RandomPolicy:
    """Calls a random tool with random arguments of the right types: the floor any agent should beat."""

    name = "random"

    async def act(self, env: Env, messages: Sequence[Message], rng: np.random.Generator) -> str:
        return env.random_action(rng)


POLICIES: dict[str, type[Policy]] = {"oracle": OraclePolicy, "random": RandomPolicy}


def get_policy(name: str) -> Policy:
    """A reference policy by name."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)}") from None
