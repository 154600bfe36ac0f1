"""The ``openai`` engine: any OpenAI-compatible endpoint, for evaluating served or hosted models
(:mod:`agentgym.inference.openai.engine`). Importing this package imports neither the ``openai`` client nor the
engine."""

from __future__ import annotations

from agentgym.inference.spec import EngineSpec

SPEC = EngineSpec("openai", "agentgym.inference.openai.engine:OpenAIEngine", kind="remote")
