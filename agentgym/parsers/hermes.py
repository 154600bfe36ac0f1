"""``hermes``: ``<tool_call>{"name": "move", "arguments": {"direction": "up"}}</tool_call>``, the format of Hermes,
Qwen2.5 and Qwen3 chat templates."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from agentgym.messages import ToolCall
from agentgym.parsers.base import ParseResult, call_from_json, collect
from agentgym.tools import ToolSpec


class HermesParser:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, as Qwen and Hermes emit them."""

    name = "hermes"
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)

    def parse(self, text: str, tools: Sequence[ToolSpec] = ()) -> ParseResult:
        calls = (call_from_json(match.group(1)) for match in self._block.finditer(text))
        return collect(calls, self._block.sub("", text).strip())

    def format(self, calls: Sequence[ToolCall], content: str = "") -> str:
        blocks = [
            "<tool_call>\n" + json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False) + "\n</tool_call>"
            for c in calls
        ]
        return "\n".join(([content] if content else []) + blocks)
