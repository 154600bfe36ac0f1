"""``mistral``: Mistral's ``[TOOL_CALLS]`` calls.

Mistral Small 3.1 and later, Devstral and Magistral (tokenizer v11 and up) write each call as
``[TOOL_CALLS]move[ARGS]{"direction": "up"}`` after any text (v13 puts ``[CALL_ID]id`` before ``[ARGS]``);
earlier models (Mistral 7B v0.3, Nemo) write ``[TOOL_CALLS] [{"name": ..., "arguments": {...}, "id": ...}]``.
Both are read; calls are written the v11 way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from agentgym.messages import ToolCall
from agentgym.parsers.base import Found, ParseResult, call_from_payload, collect
from agentgym.tools import ToolSpec

TOOL_CALLS, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"


class MistralParser:
    """``[TOOL_CALLS]name[ARGS]{...}`` per call, or one ``[TOOL_CALLS] [{...}, ...]`` list."""

    name = "mistral"

    def parse(self, text: str, tools: Sequence[ToolSpec] = ()) -> ParseResult:
        content, *pieces = text.split(TOOL_CALLS)
        trailing: list[str] = []
        calls = [call for piece in pieces for call in _calls(piece, trailing)]
        return collect(calls, "\n".join(part.strip() for part in (content, *trailing) if part.strip()))

    def format(self, calls: Sequence[ToolCall], content: str = "") -> str:
        return content + "".join(
            f"{TOOL_CALLS}{c.name}{ARGS}{json.dumps(c.arguments, ensure_ascii=False)}" for c in calls
        )


def _calls(piece: str, trailing: list[str]) -> Iterator[Found]:
    """The calls of the text after one ``[TOOL_CALLS]``; text after them goes to ``trailing``."""
    decoder = json.JSONDecoder()
    body = piece.lstrip()
    if body.startswith(("[", "{")):
        try:
            payload, end = decoder.raw_decode(body)
        except (json.JSONDecodeError, RecursionError) as exc:
            yield f"is not valid JSON: {exc}"
            return
        yield from map(call_from_payload, payload if isinstance(payload, list) else [payload])
        trailing.append(body[end:])
        return
    name, separator, arguments = piece.partition(ARGS)
    name = name.partition(CALL_ID)[0].strip()
    if not separator or not name:
        yield f"must be {TOOL_CALLS}name{ARGS}{{...}} or {TOOL_CALLS} [{{\"name\": ..., \"arguments\": {{...}}}}]"
        return
    arguments = arguments.lstrip()
    try:
        payload, end = decoder.raw_decode(arguments)
    except (json.JSONDecodeError, RecursionError) as exc:
        yield f"({name}) has arguments that are not valid JSON: {exc}"
        return
    yield call_from_payload(payload, name)
    trailing.append(arguments[end:])
