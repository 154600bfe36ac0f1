"""Tool-call parsers: find the tool calls in an agent's text, and write calls back as text, in each format that
open models emit. A parser never raises on what a model writes: what it cannot read becomes an entry in
:attr:`ParseResult.errors`, which the environment shows the agent as an error observation.

| name | format | models |
|---|---|---|
| ``hermes`` | ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` | Hermes, Qwen2.5, Qwen3 |
| ``pythonic`` | ``move(direction="up")`` | Llama 3.2 and 4 (pythonic templates), people at ``agentgym play`` |
| ``qwen3_coder`` | ``<tool_call><function=move><parameter=direction>up</parameter>...`` | Qwen3-Coder |
| ``llama3_json`` | ``{"name": ..., "parameters": {...}}`` | Llama 3.1-3.3 |
| ``mistral`` | ``[TOOL_CALLS]move[ARGS]{...}`` (and the older JSON list) | Mistral, Devstral, Magistral |
| ``deepseek`` | ``<｜tool▁call▁begin｜>move<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`` | DeepSeek-V3, V3.1, R1 |
| ``harmony`` | ``<|channel|>commentary to=functions.move <|constrain|>json<|message|>{...}<|call|>`` | gpt-oss |

``parser: auto`` (in a training config's ``env.kwargs``, or ``agentgym eval --env-arg parser=auto``) takes the
format the model's chat template declares: :func:`resolve_parser`.
"""

from __future__ import annotations

from agentgym.parsers.base import MAX_CALLS, MAX_DEPTH, ParseResult, ToolCallParser
from agentgym.parsers.deepseek import DeepSeekParser
from agentgym.parsers.harmony import HarmonyParser
from agentgym.parsers.hermes import HermesParser
from agentgym.parsers.llama3_json import Llama3JsonParser
from agentgym.parsers.mistral import MistralParser
from agentgym.parsers.pythonic import PythonicParser
from agentgym.parsers.qwen3_coder import Qwen3CoderParser
from agentgym.parsers.template import AUTO, chat_template, resolve_parser, template_format

PARSERS: dict[str, type[ToolCallParser]] = {
    parser.name: parser
    for parser in (HermesParser, PythonicParser, Qwen3CoderParser, Llama3JsonParser, MistralParser, DeepSeekParser,
                   HarmonyParser)
}
"""Every format by its short name."""


def get_parser(parser: str | ToolCallParser) -> ToolCallParser:
    """A parser by short name (one of :data:`PARSERS`), or the given parser object unchanged."""
    if not isinstance(parser, str):
        return parser
    if parser == AUTO:
        raise ValueError("parser: auto is resolved from a model's chat template by `agentgym train` and `agentgym "
                         "eval`; an environment made on its own needs the format by name: "
                         f"{', '.join(PARSERS)}")
    try:
        return PARSERS[parser]()
    except KeyError:
        raise ValueError(f"unknown tool-call format {parser!r}; choose one of: {', '.join(PARSERS)}") from None


__all__ = [
    "AUTO",
    "MAX_CALLS",
    "MAX_DEPTH",
    "PARSERS",
    "DeepSeekParser",
    "HarmonyParser",
    "HermesParser",
    "Llama3JsonParser",
    "MistralParser",
    "ParseResult",
    "PythonicParser",
    "Qwen3CoderParser",
    "ToolCallParser",
    "chat_template",
    "get_parser",
    "resolve_parser",
    "template_format",
]
