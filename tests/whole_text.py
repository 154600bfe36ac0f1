"""A tool-call parser for test envs: a whole message is one call of ``say``, so whatever an untrained
model writes is an action."""

from __future__ import annotations

from typing import Any

from agentgym.messages import ToolCall
from agentgym.parsers import ParseResult


class WholeText:
    """Reads a whole message as one call of ``say``."""

    name = "whole-text"

    def parse(self, text: str, tools: Any = ()) -> ParseResult:
        return ParseResult(calls=[ToolCall(id="call_0", name="say", arguments={"text": text})])

    def format(self, calls: Any, content: str = "") -> str:
        return "\n".join([content, *(call.arguments["text"] for call in calls)]).strip()
