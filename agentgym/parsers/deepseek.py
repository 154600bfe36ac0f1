"""``deepseek``: DeepSeek's calls between its special tokens.

DeepSeek-V3.1 and V3.2 write ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>move<｜tool▁sep｜>{"direction": "up"}<｜tool▁call▁end｜>``
(more calls follow directly) ``<｜tool▁calls▁end｜>``; DeepSeek-V3 and R1 write ``function<｜tool▁sep｜>move`` and the
arguments in a fenced JSON block. Both are read; calls are written the V3.1 way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from agentgym.messages import ToolCall
from agentgym.parsers.base import Found, ParseResult, call_from_payload, collect
from agentgym.tools import ToolSpec

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, SEPARATOR, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"


class DeepSeekParser:
    """``<｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`` calls (V3.1), or V3's fenced ones."""

    name = "deepseek"
    _call = re.compile(re.escape(CALL_BEGIN) + r"(.*?)" + re.escape(SEPARATOR) + r"(.*?)(?:" + re.escape(CALL_END)
                       + r"|(?=" + re.escape(CALL_BEGIN) + r")|\Z)", re.DOTALL)
    _section = re.compile(re.escape(CALLS_BEGIN) + r".*?(?:" + re.escape(CALLS_END) + r"|\Z)", re.DOTALL)
    _fenced = re.compile(r"\s*(\S+)\s*```(?:json)?\s*(.*?)\s*```\s*\Z", re.DOTALL)

    def parse(self, text: str, tools: Sequence[ToolSpec] = ()) -> ParseResult:
        calls = [self._read(head, tail) for section in self._section.findall(text)
                 for head, tail in self._call.findall(section)]
        return collect(calls, self._section.sub("", text).strip())

    def format(self, calls: Sequence[ToolCall], content: str = "") -> str:
        if not calls:
            return content
        body = "".join(f"{CALL_BEGIN}{c.name}{SEPARATOR}{json.dumps(c.arguments, ensure_ascii=False)}{CALL_END}" for c in calls)
        return f"{content}{CALLS_BEGIN}{body}{CALLS_END}"

    def _read(self, head: str, tail: str) -> Found:
        """A call from the text before and after the separator, in either version's layout."""
        fenced = self._fenced.match(tail) if head.strip() == "function" else None
        name, arguments = (fenced.group(1), fenced.group(2)) if fenced else (head.strip(), tail)
        return call_from_payload(arguments, name) if name else "has no tool name before its separator"
