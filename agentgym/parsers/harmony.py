"""``harmony``: OpenAI's harmony format (gpt-oss), calls as messages to ``functions.NAME`` on the commentary channel.

After the prompt's ``<|start|>assistant`` a model writes messages such as
``<|channel|>analysis<|message|>reasoning<|end|>``, then a call,
``<|start|>assistant<|channel|>commentary to=functions.move <|constrain|>json<|message|>{"direction": "up"}<|call|>``
(the recipient may also stand before ``<|channel|>``), or an answer, ``<|channel|>final<|message|>text<|return|>``.
The content is the text of the messages that are neither calls nor reasoning; text without harmony's tokens is all
content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from agentgym.messages import ToolCall
from agentgym.parsers.base import Found, ParseResult, call_from_payload, collect
from agentgym.tools import ToolSpec

START, CHANNEL, MESSAGE, CONSTRAIN = "<|start|>assistant", "<|channel|>", "<|message|>", "<|constrain|>"
END, CALL, RETURN = "<|end|>", "<|call|>", "<|return|>"


class HarmonyParser:
    """Harmony messages: ``to=functions.NAME`` ones are calls with JSON bodies; ``final`` and ``commentary`` ones
    without a recipient are content; ``analysis`` is left out."""

    name = "harmony"
    _message = re.compile(r"(?:<\|start\|>\w*)?(.*?)<\|message\|>(.*?)(?:<\|end\|>|<\|call\|>|<\|return\|>|\Z)",
                          re.DOTALL)
    _recipient = re.compile(r"\bto=functions\.([^\s<]+)")
    _channel = re.compile(r"<\|channel\|>(\w+)")

    def parse(self, text: str, tools: Sequence[ToolSpec] = ()) -> ParseResult:
        if MESSAGE not in text:
            return collect([], text.strip())
        calls: list[Found] = []
        content: list[str] = []
        for header, body in self._message.findall(text):
            recipient, channel = self._recipient.search(header), self._channel.search(header)
            if recipient:
                calls.append(call_from_payload(body, recipient.group(1)))
            elif channel is None or channel.group(1) != "analysis":
                content.append(body.strip())
        return collect(calls, "\n".join(part for part in content if part))

    def format(self, calls: Sequence[ToolCall], content: str = "") -> str:
        if not calls:
            return f"{CHANNEL}final{MESSAGE}{content}{RETURN}"
        messages = [f"{CHANNEL}commentary{MESSAGE}{content}{END}"] if content else []
        messages += [f"{CHANNEL}commentary to=functions.{c.name} {CONSTRAIN}json{MESSAGE}"
                     f"{json.dumps(c.arguments, ensure_ascii=False)}{CALL}" for c in calls]
        return START.join(messages)
