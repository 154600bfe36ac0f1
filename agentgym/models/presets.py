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
    embedding_rows: int | None = Field(None, ge=512)
    """Rows of the embedding and output layers (the model config's ``vocab_size``): null gives one per token of
    the trained vocabulary; more pads them past it, as Qwen2.5 pads its 151,665 tokens to 151,936 rows, so that
    the model has a real checkpoint's shape and size (the extra rows are never in a prompt, but an untrained
    model samples them: they decode to nothing)."""
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
        if self.embedding_rows is not None and self.embedding_rows < self.vocab_size:
            raise ValueError("embedding_rows must be at least vocab_size (a row for every token)")
        return self

    def config_kwargs(self) -> dict[str, Any]:
        """The fields a ``transformers`` model config takes (vocabulary and rope are set by the builder)."""
        return self.model_dump(exclude={"vocab_size", "embedding_rows", "corpus_episodes", "rope_theta"})


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        num_hidden_layers=2, hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=512, vocab_size=2048,
    ),
    "small": Preset(
        num_hidden_layers=4, hidden_size=256, num_attention_heads=8, num_key_value_heads=4,
        intermediate_size=1024, vocab_size=4096, corpus_episodes=32,
    ),
    # Qwen2.5-0.5B's shape and parameter count (494M) with random weights, for GPU throughput and memory checks
    # (scripts/gpu_check.sh): the corpus gives a tokenizer of about 1,100 tokens, and the embedding is padded to
    # Qwen2.5's 151,936 rows. About 20 s and 2 GB (float32) to build on two cores.
    "qwen2.5-0.5b": Preset(
        num_hidden_layers=24, hidden_size=896, num_attention_heads=14, num_key_value_heads=2,
        intermediate_size=4864, vocab_size=151_936, embedding_rows=151_936, corpus_episodes=4,
        max_position_embeddings=32_768, rope_theta=1_000_000.0,
    ),
    # Qwen2.5-Coder-1.5B's shape (1.5B parameters) with random weights: the GPU check's SWE steps (gpu-swe-coder.yaml).
    "qwen2.5-coder-1.5b": Preset(
        num_hidden_layers=28, hidden_size=1536, num_attention_heads=12, num_key_value_heads=2,
        intermediate_size=8960, vocab_size=151_936, embedding_rows=151_936, corpus_episodes=4,
        max_position_embeddings=32_768, rope_theta=1_000_000.0,
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
