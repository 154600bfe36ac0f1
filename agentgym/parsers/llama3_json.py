"""``llama3_json``: Llama 3.1-3.3's JSON calls, ``{"name": "move", "parameters": {"direction": "up"}}``.

The Llama 3.1 JSON template writes one such object as the assistant's whole message; a model may put
``<|python_tag|>`` before it, and several calls separated by ``; `` (as vLLM's ``llama3_json`` parser reads them).
Any JSON object in the text with a ``"name"`` and ``"parameters"`` (or ``"arguments"``) is a call; an object that
starts like one but is not valid JSON is reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence

from agentgym.messages import ToolCall
from agentgym.parsers.base import Found, ParseResult, call_from_payload, collect, remove_spans
from agentgym.tools import ToolSpec

_PYTHON_TAG = "<|python_tag|>"


class Llama3JsonParser:
    """``{"name": ..., "parameters": {...}}`` objects anywhere in the text, ``; ``-separated."""

    name = "llama3_json"
    _start = re.compile(r"\{")
    _looks_like_call = re.compile(r'\{\s*"name"\s*:')
    _max_candidates = 256

    def parse(self, text: str, tools: Sequence[ToolSpec] = ()) -> ParseResult:
        spans: list[tuple[int, int]] = []
        calls = list(self._calls(text, spans))
        content = remove_spans(text, spans).replace(_PYTHON_TAG, "")
        return collect(calls, content.strip(" \n;"))

    def format(self, calls: Sequence[ToolCall], content: str = "") -> str:
        objects = "; ".join(json.dumps({"name": c.name, "parameters": c.arguments}, ensure_ascii=False) for c in calls)
        return "\n".join(part for part in (content, objects) if part)

    def _calls(self, text: str, spans: list[tuple[int, int]]) -> Iterator[Found]:
        """Each call object in ``text``, recording its span."""
        decoder, position = json.JSONDecoder(), 0
        for candidates, match in enumerate(self._start.finditer(text)):
            if candidates >= self._max_candidates:
                return
            start = match.start()
            if start < position:
                continue
            try:
                payload, end = decoder.raw_decode(text, start)
            except (json.JSONDecodeError, RecursionError) as exc:
                if self._looks_like_call.match(text, start):
                    position = len(text)
                    spans.append((start, position))
                    yield f"is not valid JSON: {exc}"
                continue
            if isinstance(payload, dict) and "name" in payload and ({"parameters", "arguments"} & payload.keys()):
                spans.append((start, end))
                position = end
                yield call_from_payload(payload)
