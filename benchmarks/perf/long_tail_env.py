"""A benchmark environment whose steps take a long-tailed time, like real tools, browsers and sandboxes."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from agentgym import Env, Message, tool
from agentgym.core import StepResult
from agentgym.envs.games.frozen_lake import FrozenLakeEnv

P99_Z = 2.326
"""The standard normal's 99th percentile: a log-normal's p99 is ``median * exp(P99_Z * sigma)``."""


class LongTailLatency(Env):
    """Mixin: each step first sleeps a log-normal time drawn from the episode's seed (the same episode
    waits the same in every run). ``median`` in seconds; ``tail`` is the p99/median ratio."""

    def __init__(self, *, median: float = 0.1, tail: float = 20.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.median, self.sigma = median, math.log(tail) / P99_Z

    def step_seconds(self) -> float:
        """The latency of the next step."""
        return self.median * math.exp(self.sigma * float(self.np_random.standard_normal()))

    async def astep(self, action: str) -> StepResult:
        await asyncio.sleep(self.step_seconds())
        return await super().astep(action)


class LongTailEnv(LongTailLatency):
    """Accepts any text (a `submit` call is acknowledged, anything else answered with an error note);
    every step takes a long-tailed time."""

    execution = "inline"
    default_max_turns = 4

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        return [Message(role="user", content="Write anything you like; every answer takes a while to process.")]

    @tool
    def submit(self, text: str) -> str:
        """Hand in an answer.

        Args:
            text: Anything.
        """
        return "received"


class LongTailLake(LongTailLatency, FrozenLakeEnv):
    """FrozenLake whose every move takes a long-tailed time, as if the lake were a slow remote tool."""
