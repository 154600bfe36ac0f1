"""Which tool-call format a chat template declares, read off the template's own text."""

from __future__ import annotations

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
