"""Inference engines behind one async protocol: ``torch`` (in-process, the default), ``vllm`` (GPU)
and ``openai`` (any OpenAI-compatible endpoint). Engines are imported only when asked for by name."""

from __future__ import annotations

import importlib
from typing import Any

from agentgym.inference.types import (
    ChatEngine,
    ChatResult,
    EngineStats,
    FinishReason,
    GenerationChunk,
    GenerationRequest,
    GenerationResult,
    InferenceEngine,
    SamplingParams,
    SleepingEngine,
    StreamingEngine,
    stream_generation,
)

ENGINES: dict[str, str] = {
    "torch": "agentgym.inference.torch_engine:TorchEngine",
    "vllm": "agentgym.inference.vllm_engine:VLLMEngine",
    "openai": "agentgym.inference.openai_engine:OpenAIEngine",
}


def engine_class(name: str) -> type:
    """The engine class registered under ``name``, imported on first use."""
    try:
        module, _, attr = ENGINES[name].partition(":")
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINES)}") from None
    cls: type = getattr(importlib.import_module(module), attr)
    return cls


def load_engine(name: str, **kwargs: Any) -> InferenceEngine | ChatEngine:
    """Build the engine ``name`` with its constructor's keyword arguments."""
    engine: InferenceEngine | ChatEngine = engine_class(name)(**kwargs)
    return engine


__all__ = [
    "ENGINES",
    "ChatEngine",
    "ChatResult",
    "EngineStats",
    "FinishReason",
    "GenerationChunk",
    "GenerationRequest",
    "GenerationResult",
    "InferenceEngine",
    "SamplingParams",
    "SleepingEngine",
    "StreamingEngine",
    "engine_class",
    "load_engine",
    "stream_generation",
]
