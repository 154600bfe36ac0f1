"""Small local models for agentgym: a preset-sized Qwen2 or Llama model with a byte-level BPE tokenizer
trained on the bundled environments' text and a chat template that renders tool calls.
``agentgym model init --preset tiny OUT_DIR`` builds one; nothing is fetched from a hub."""

from agentgym.models.build import ModelInfo, init_model, model_info
from agentgym.models.chat_template import CHAT_TEMPLATE
from agentgym.models.presets import ARCHITECTURES, PRESETS, Preset, get_preset
from agentgym.models.tokenizer import CONTROL_TOKENS, EOS_TOKEN, PAD_TOKEN, TOOL_TOKENS

__all__ = [
    "ARCHITECTURES",
    "CHAT_TEMPLATE",
    "CONTROL_TOKENS",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "PRESETS",
    "TOOL_TOKENS",
    "ModelInfo",
    "Preset",
    "get_preset",
    "init_model",
    "model_info",
]
