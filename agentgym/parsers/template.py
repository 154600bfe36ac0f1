"""Which tool-call format a chat template declares, read off the template's own text: ``parser: auto``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

AUTO = "auto"
"""The ``parser`` value that asks for the model's own format."""

_MARKERS = (  # the most specific first: Qwen3-Coder's template also has <tool_call>
    ("qwen3_coder", ("<function=", "<parameter=")),
    ("harmony", ("<|constrain|>",)),
    ("harmony", ("to=functions.",)),
    ("deepseek", ("tool▁call▁begin",)),
    ("mistral", ("[TOOL_CALLS]",)),
    ("hermes", ("<tool_call>",)),
    ("llama3_json", ("<|python_tag|>",)),
    ("llama3_json", ('"parameters": ', "<|start_header_id|>ipython")),
    ("pythonic", ("[func_name1(",)),
)


def template_format(template: str | None) -> str | None:
    """The name of the format a chat template writes tool calls in, or None when its text names none of them."""
    for name, markers in _MARKERS:
        if template and all(marker in template for marker in markers):
            return name
    return None


def chat_template(model: str | Path) -> str | None:
    """The chat template of a local model or tokenizer folder (``chat_template.jinja``, or ``chat_template`` in
    ``tokenizer_config.json``, the tool-use one where it names several), or None."""
    folder = Path(model)
    if (folder / "chat_template.jinja").is_file():
        return (folder / "chat_template.jinja").read_text()
    config = folder / "tokenizer_config.json"
    template = json.loads(config.read_text()).get("chat_template") if config.is_file() else None
    if isinstance(template, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        named = {entry.get("name"): entry.get("template") for entry in template if isinstance(entry, dict)}
        template = named.get("tool_use", named.get("default"))
    return template if isinstance(template, str) else None


def resolve_parser(kwargs: dict[str, Any], model: str | Path, key: str = "parser") -> dict[str, Any]:
    """``kwargs`` with ``parser: auto`` replaced by the format ``model``'s chat template declares; ``ValueError``
    naming ``key`` when the model has no template here or its template names no format."""
    if kwargs.get("parser") != AUTO:
        return kwargs
    found = template_format(chat_template(model))
    if found is None:
        raise ValueError(f"{key}: auto takes the tool-call format from the chat template of {model}, which "
                         "has none here or names none of the formats; set the format by name")
    return {**kwargs, "parser": found}
