"""Environments for the performance benchmarks: as cheap as an environment can be, so what is measured
is the framework around them."""

from __future__ import annotations

from typing import Any

from agentgym import Env, Message, tool
from agentgym.core import StepResult

NOOP_TURNS = 32
"""The length of a no-op episode; it always ends truncated."""


class NoopEnv(Env):
    """One tool, ``noop()``, that answers a constant string; an episode lasts ``NOOP_TURNS`` turns
    (``max_turns`` changes that) and never ends by itself."""

    execution = "inline"
    default_max_turns = NOOP_TURNS

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        return [Message(role="user", content="Call noop.")]

    @tool
    def noop(self) -> str:
        """Do nothing."""
        return "ok"

    def oracle_action(self) -> str:
        return self.format_call("noop")


class SolverEnv(Env):
    """Every step, whatever the action, first generates ``levels`` hard Sokoban levels from the episode's random
    stream and solves each with the bundled optimal solver, in Python on the calling thread: an environment whose
    steps are CPU-bound, as a game engine, a simulator or a checker is. ``solve()`` reports the moves found; an
    episode lasts ``max_turns`` turns."""

    execution = "inline"
    default_max_turns = 4

    def __init__(self, *, levels: int = 12, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.levels = levels
        self.moves = 0

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        return [Message(role="user", content="Call solve.")]

    async def astep(self, action: str) -> StepResult:
        from agentgym.envs.games.sokoban_levels import generate, solve

        self.moves = sum(len(solve(generate(self.np_random, "hard")) or []) for _ in range(self.levels))
        return await super().astep(action)

    @tool
    def solve(self) -> str:
        """Report the moves of the levels solved this step."""
        return f"{self.moves} moves"

    def oracle_action(self) -> str:
        return self.format_call("solve")
