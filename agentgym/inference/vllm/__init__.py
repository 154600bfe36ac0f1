"""The ``vllm`` engine: vLLM's async engine fed token ids, with weight updates in place
(:mod:`agentgym.inference.vllm.engine`). Importing this package imports neither vLLM nor the engine."""

from __future__ import annotations

from typing import Any

from agentgym.inference.spec import EngineSettings, EngineSpec


def engine_kwargs(settings: EngineSettings) -> dict[str, Any]:
    """The episode's context, the dtype the trainer trains in (vLLM samples in it), and vLLM's sleep mode where
    the engine sleeps between its turns."""
    kwargs: dict[str, Any] = {"max_model_len": settings.max_context}
    if settings.dtype:
        kwargs["dtype"] = settings.dtype
    if settings.sleeps:
        kwargs["enable_sleep_mode"] = True
    return kwargs


SPEC = EngineSpec("vllm", "agentgym.inference.vllm.engine:VLLMEngine", kind="local", replicable=True, trees=True,
                  untempered_tree_logprobs=True, sleeps=True, kwargs=engine_kwargs)
