"""Inference engines behind one async protocol: ``torch`` (in-process, the default), ``vllm`` (GPU)
and ``openai`` (any OpenAI-compatible endpoint), one package each, registered by their :class:`EngineSpec`
(:mod:`agentgym.inference.spec`). Engines are imported only when asked for by name."""

from __future__ import annotations

from typing import Any

from agentgym.inference.openai import SPEC as OPENAI
from agentgym.inference.spec import ENGINES, EngineSettings, EngineSpec, engine_spec, engines, register_engine
from agentgym.inference.torch import SPEC as TORCH
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
from agentgym.inference.vllm import SPEC as VLLM

register_engine(TORCH)
register_engine(VLLM)
register_engine(OPENAI)


def engine_class(name: str) -> type:
    """The engine class registered under ``name``, imported on first use."""
    return engine_spec(name).load()


def load_engine(name: str, **kwargs: Any) -> InferenceEngine | ChatEngine:
    """Build the engine ``name`` with its constructor's keyword arguments."""
    engine: InferenceEngine | ChatEngine = engine_class(name)(**kwargs)
    return engine


__all__ = [
    "ENGINES",
    "ChatEngine",
    "ChatResult",
    "EngineSettings",
    "EngineSpec",
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
    "engine_spec",
    "engines",
    "load_engine",
    "register_engine",
    "stream_generation",
]
