"""Where an engine runs: in this process (:class:`LocalEngineHost`), or as replica actors on Ray (the ``ray``
backend of :mod:`agentgym.cluster`). A rollout backend is an engine host that also runs episodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from agentgym.inference import engine_class
from agentgym.inference.types import InferenceEngine


class EngineHost(Protocol):
    """Starts inference engines by name where this host runs them."""

    name: str

    def engine(self, name: str, model: str | Path, **engine_kwargs: Any) -> InferenceEngine:
        """Inference engine ``name`` (``torch``, ``vllm``) serving the local model folder ``model``."""
        ...


class LocalEngineHost:
    """Starts each engine in this process."""

    name = "local"

    def engine(self, name: str, model: str | Path, **engine_kwargs: Any) -> InferenceEngine:
        engine: InferenceEngine = engine_class(name)(model, **engine_kwargs)
        return engine
