"""Model sizes for ``agentgym model init``: a small typed table of presets and the two architectures."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Arch = Literal["qwen2", "llama"]
ARCHITECTURES: dict[str, str] = {"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}
"""Architecture short name -> the ``transformers`` class (also what vLLM reads from ``config.json``)."""


class Preset(BaseModel):
    """The shape of one model size."""

    model_config = ConfigDict(frozen=True)

    num_hidden_layers: int = Field(ge=1)
    hidden_size: int = Field(ge=32)
    num_attention_heads: int = Field(ge=1)
    num_key_value_heads: int = Field(ge=1)
    """Grouped-query attention: key/value heads shared by ``num_attention_heads // num_key_value_heads`` heads."""
    intermediate_size: int = Field(ge=1)
    """Width of the MLP's hidden layer."""
    vocab_size: int = Field(ge=512)
    """Most tokens in the trained vocabulary (special tokens and the 256 bytes included); a corpus with
    fewer distinct words stops short of it."""
    corpus_episodes: int = Field(16, ge=1)
    """Episodes played per environment, difficulty, policy and tool-call format for the tokenizer's corpus."""
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = True
    rope_theta: float = 10_000.0

    @property
    def head_dim(self) -> int:
        """Width of one attention head (a multiple of 32, which every vLLM attention backend takes)."""
        return self.hidden_size // self.num_attention_heads

    @model_validator(mode="after")
    def _shapes_fit(self) -> Preset:
        if self.hidden_size % self.num_attention_heads or self.head_dim % 32:
            raise ValueError("hidden_size / num_attention_heads must be a whole multiple of 32 (the head width)")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        return self

    def config_kwargs(self) -> dict[str, Any]:
        """The fields a ``transformers`` model config takes (vocabulary and rope are set by the builder)."""
        return self.model_dump(exclude={"vocab_size", "corpus_episodes", "rope_theta"})


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        num_hidden_layers=2, hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=512, vocab_size=2048,
    ),
    "small": Preset(
        num_hidden_layers=4, hidden_size=256, num_attention_heads=8, num_key_value_heads=4,
        intermediate_size=1024, vocab_size=4096, corpus_episodes=32,
    ),
}


def get_preset(name: str) -> Preset:
    """A preset by name; an unknown name lists the valid ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown model preset {name!r}; choose one of: {', '.join(PRESETS)}") from None


def check_arch(arch: str) -> str:
    """The ``transformers`` class name of ``arch``; an unknown name lists the valid ones."""
    try:
        return ARCHITECTURES[arch]
    except KeyError:
        raise ValueError(f"unknown architecture {arch!r}; choose one of: {', '.join(ARCHITECTURES)}") from None
