"""Environments for the performance benchmarks: as cheap as an environment can be, so what is measured
is the framework around them. Importable from ``benchmarks/perf`` (each script puts it on ``sys.path``)."""

from __future__ import annotations

from typing import Any

from agentgym import Env, Message, tool

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
