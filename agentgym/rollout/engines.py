"""Model-backed policies by engine name: what ``agentgym eval --engine`` and the trainers start from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agentgym.inference import engine_class
from agentgym.inference.types import SamplingParams
from agentgym.rollout.chat_policy import ChatPolicy
from agentgym.rollout.lm_policy import LMPolicy


@asynccontextmanager
async def engine_policy(
    engine: str,
    model: str | Path,
    *,
    base_url: str | None = None,
    tokenizer: str | Path | None = None,
    sampling: SamplingParams | None = None,
    max_context: int = 4096,
    **engine_kwargs: Any,
) -> AsyncIterator[LMPolicy | ChatPolicy]:
    """Start ``engine`` on ``model`` (a local folder for ``torch``/``vllm``, a served model name for
    ``openai`` at ``base_url``), yield a policy backed by it, and close the engine afterwards. On ``openai``,
    a local ``tokenizer`` makes the policy token-level (``/v1/completions``, as on ``torch``) instead of chat."""
    cls = engine_class(engine)
    label = f"{engine}-{Path(str(model)).name or model}"
    if engine == "openai":
        if not base_url:
            raise ValueError("the openai engine needs base_url (the server's /v1 address)")
        backend = cls(base_url, str(model), tokenizer=tokenizer, **engine_kwargs)
        policy: LMPolicy | ChatPolicy = (LMPolicy(backend, sampling, max_context=max_context, name=label) if tokenizer
                                         else ChatPolicy(backend, sampling, name=label))
    else:
        if not Path(model).is_dir():
            raise ValueError(f"model {str(model)!r} is not a folder; build one with `agentgym model init --preset tiny DIR`")
        backend = cls(model, **engine_kwargs)
        policy = LMPolicy(backend, sampling, max_context=max_context, name=label)
    try:
        yield policy
    finally:
        await backend.close()
