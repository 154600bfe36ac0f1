"""An engine that keeps each request it was sent, to check what a model saw against what a trajectory records."""

from __future__ import annotations

from typing import Any

from agentgym.inference import GenerationRequest, GenerationResult, InferenceEngine


class RecordingEngine:
    """An engine (torch, vllm, ...), keeping each request it was sent."""

    def __init__(self, engine: InferenceEngine) -> None:
        self.engine = engine
        self.requests: list[GenerationRequest] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        self.requests.append(request)
        return await self.engine.generate(request)
